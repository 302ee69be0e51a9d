/* Executors that take turns: one laid out inside another's planned arena. */
#ifndef CLRUN_LIB_EXEC_SHARE_H
#define CLRUN_LIB_EXEC_SHARE_H

#include <stdbool.h>
#include <stdint.h>

#include <clrun/exec.h>

/* A trial executor's arena is planned within at most this many seconds (its options' limit when
 * that is less): the budget searches (exec_budget.c, train_budget.c) prepare several. */
#define CLRUN__TRIAL_PLAN_SECONDS 0.25

/* clrun_exec_create of the graph as given (options->memory_budget and the pool's limit never
 * rewrite it), with `host` (may be NULL): in planned mode, when host's planned arena is
 * at least as large as the new executor's and the context's queue is in order, the new
 * executor's arena is a view of host's instead of memory of its own (nothing more is reserved).
 * The two must never run at once, a run of either overwrites what the other's last run left in
 * its arena (outputs not taken out), and host must outlive the new executor. */
clrun_status clrun__exec_create_beside(clrun_context *ctx, const clrun_graph *graph,
                                       const clrun_exec_options *options, const clrun_exec *host,
                                       clrun_exec **out);

/* What the context's pool holds now (its live blocks, resident regions and own buffers; not
 * the empty chunks it would give back first) and its limit (0: none): the room a budget taken
 * from the pool's limit starts from (exec_budget.c, train_budget.c). */
uint64_t clrun__exec_pool_held(clrun_context *ctx, uint64_t *limit);

/* The planner's best layout, within `seconds` and under `capacity` (0: none), of every buffer
 * of `exec` (its inputs too where `inputs`): the bytes it spans, in *span. What pooled and
 * naive executors hold is known only as they run; this is its estimate. Fails with the
 * planner's or the executor's status and message. */
clrun_status clrun__exec_plan_span(const clrun_exec *exec, bool inputs, double seconds,
                                   uint64_t capacity, uint64_t *span);

/* The FLOPs the device computes in the time it moves one byte to or from host memory:
 * CLRUN_OFFLOAD_RATE where given, else measured once per device per process (a few ms: timed
 * copies and a timed product) and remembered in the cache directory; *measured (may be NULL)
 * says whether this call timed it. A failure leaves the context's error set. (exec_rate.c) */
clrun_status clrun__exec_offload_rate(clrun_context *ctx, double *rate, bool *measured);

#endif
