/* clrun: training. A trainer holds a model's train step (its graph: <clrun/train_graph.h> says
 * what goes into it) prepared on a context, and the train state on the device: the parameters
 * (at first the model's weights) and the optimizer's state (zeros at first). Each step donates
 * the state to the step's executor and takes the updated values back in the same blocks, so no
 * parameter and no moment ever exists twice on the device; each parameter is updated as soon as
 * its gradient is complete, and that gradient dies there.
 *
 * A failed step (out of device memory, say) loses the state it had donated: the trainer then
 * refuses further steps, naming the step that failed; bad feeds (a label out of range, a feed
 * of the wrong size) are refused before anything is donated, so they lose nothing. */
#ifndef CLRUN_TRAIN_H
#define CLRUN_TRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <clrun/context.h>
#include <clrun/exec.h>
#include <clrun/graph.h>
#include <clrun/remat.h>
#include <clrun/train_graph.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A reduction of each step's gradients across processes or devices (data-parallel training;
 * libclrun stays free of MPI: libclrun-mpi's <clrun/mpi.h> has such hooks). clrun_train_step
 * calls it after the backward pass and before the optimizer's update with this step's gradient
 * of every parameter, in parameter order (clrun_train_param_info), concatenated in host memory
 * as `count` floats (the sum of the parameters' elements); it replaces them in place with the
 * gradients the update is to use (for data parallelism: the sum over the processes of each
 * one's gradient weighted by its share of the global batch, which is the gradient of the mean
 * loss over the global batch). `step` is the step's number (1 for the first). A status other
 * than CLRUN_OK fails the step with the text it wrote to err (errlen bytes, NUL-terminated):
 * the parameters and the optimizer state are then as before the step (a batch norm's running
 * statistics have been updated), and the trainer may step again. */
typedef clrun_status (*clrun_train_reduce_fn)(void *user, uint64_t step, float *gradients,
                                              uint64_t count, char *err, size_t errlen);

/* A bucketed reduction (clrun_train_options.bucket_start and bucket_test): the gradients in
 * buckets of about bucket_bytes, in the order the backward pass completes them. bucket_start
 * is called, on the thread of clrun_train_step and bucket after bucket in the same order on
 * every process, as soon as a bucket's gradients are in host memory, while the rest of the
 * backward pass runs on the device; it starts the reduction of those `count` floats in place
 * (a non-blocking all-reduce, say) and returns: the bucket's gradients back to back, the same
 * floats on every process whatever its device (clrun_train_bucket). bucket_test says whether a
 * started bucket's reduction is complete (*done), without waiting long: it is polled while the
 * device runs and after, until every bucket is done; then the optimizer's updates run with the
 * reduced gradients. Either failing fails the step as `reduce` does (the text it wrote to
 * err). Before the step returns, whatever failed (the run, a read, a hook), every bucket started
 * is polled until done; a bucket_test that fails gives that bucket's reduction up, and must
 * leave nothing that still writes into its gradients. The hooks run while the step's executor
 * is busy: they must not call into the trainer or its executor. */
typedef clrun_status (*clrun_train_bucket_start_fn)(void *user, uint64_t step, int32_t bucket,
                                                    float *gradients, uint64_t count, char *err,
                                                    size_t errlen);
typedef clrun_status (*clrun_train_bucket_test_fn)(void *user, uint64_t step, int32_t bucket,
                                                   bool *done, char *err, size_t errlen);

typedef struct clrun_train_options {
    clrun_train_graph_options graph; /* loss, parameters, optimizer */
    clrun_exec_options exec;         /* how the step runs (mode, fusion, profiling) */
    /* NULL (the default): each parameter is updated in the step as soon as its gradient is
     * complete. Set: the step is built in two parts, the forward and backward passes, which
     * output every gradient (so they are all alive at the end of the backward pass, and the
     * parameters are read there, not donated), then `reduce`, then the optimizer's updates, a
     * graph of their own that takes the parameters and the optimizer state in place (donated)
     * and the reduced gradients. With a reduction that returns the gradients unchanged, the
     * parameters follow the unsplit step's bit for bit. A memory budget
     * (graph.memory_budget) and clrun_train_stats' peak and lower bound count the first part
     * only (its donations count both). keep_gradients keeps this process's gradients, before
     * the reduction. */
    clrun_train_reduce_fn reduce;
    void *reduce_user;               /* reduce's first argument */
    /* The step in two parts as with a reduce hook, whether or not there is one: so that
     * clrun_train_gradients and clrun_train_apply may run the parts apart (gradient
     * accumulation over several batches, a reduction of the caller's own). clrun_train_step
     * runs both parts (and the hook, when there is one). */
    bool split_update;
    /* Both set (with reduce_user their first argument): the step split as with `reduce`, and
     * each step's gradients reduced in buckets that overlap the backward pass instead of in
     * one call after it (reduce is then not called). The same gradients reach the updates as
     * with a `reduce` that does per element what the buckets' reductions do. */
    clrun_train_bucket_start_fn bucket_start;
    clrun_train_bucket_test_fn bucket_test;
    uint64_t bucket_bytes;           /* a bucket's bytes at least (the last's less); 0: 1 MiB */
    /* With buckets: each gradient read on its own wherever the step's executor put it, instead
     * of each bucket laid out in one device region and read at once (clrun_train_bucket). The
     * same bits either way; for comparison. */
    bool bucket_per_gradient;
} clrun_train_options;

/* clrun_train_graph_options_init and clrun_exec_options_init; no reduce hook. */
void clrun_train_options_init(clrun_train_options *options);

typedef struct clrun_train clrun_train;

/* Builds the step of `model` (which must outlive nothing: the trainer keeps its own graph) and
 * prepares it on ctx; uploads the parameters and zeroes the optimizer state. On failure *out is
 * NULL, nothing is leaked and clrun_last_error(ctx) says why (a bad loss or parameter, an op
 * without a gradient rule, out of memory). */
clrun_status clrun_train_create(clrun_context *ctx, const clrun_graph *model,
                                const clrun_train_options *options, clrun_train **out);

/* Frees the trainer and its state. NULL is accepted. */
void clrun_train_destroy(clrun_train *train);

/* What a step is fed, in order: the model's inputs (clrun_graph_inputs order), then the labels
 * (xent: integers [rows...]) or targets (mse: the predictions' type); none for a scalar loss. */
int32_t clrun_train_feed_count(const clrun_train *train);
/* Feed i's name and type. CLRUN_ERROR_INVALID_ARGUMENT for an index out of range. */
clrun_status clrun_train_feed_info(const clrun_train *train, int32_t i, const char **name,
                                   clrun_tensor_type *type);

typedef struct clrun_train_step_result {
    uint64_t step;   /* steps done, this one included */
    double loss;     /* the step's loss (before its update) */
    int64_t correct; /* xent: rows whose largest logit is the label's; -1 for other losses */
    int64_t rows;    /* xent: rows of the batch; -1 for other losses */
} clrun_train_step_result;

/* One step on host data: feeds[i] holds feed i's bytes (clrun_train_feed_info's type). Labels
 * are checked first (CLRUN_ERROR_INVALID_ARGUMENT naming the position and value of the first
 * outside [0, classes)), so that a bad batch changes nothing. A loss that comes out NaN or
 * infinite gives CLRUN_ERROR_INVALID_ARGUMENT naming the step (its update has been applied).
 * result may be NULL. */
clrun_status clrun_train_step(clrun_train *train, const void *const *feeds, int32_t count,
                              clrun_train_step_result *result);

/* The two parts of a split step (clrun_train_options.reduce or split_update) apart, for
 * gradient accumulation. clrun_train_gradients runs the forward and backward passes on the
 * feeds (as clrun_train_step checks and takes them) and writes the gradient of every parameter
 * to `gradients`, concatenated in parameter order as a reduce hook gets them (`count` floats:
 * clrun_train_gradient_count); nothing is updated and the step count stays (result->step is
 * the step these gradients are for: the steps done plus one; a batch norm's running statistics
 * are updated, as by a step). clrun_train_apply runs the optimizer's updates with `gradients`
 * (count floats, the same layout) as the gradients of the next step: the parameters and the
 * optimizer state change in place and the step count goes up by one. Calling both with the
 * gradients unchanged is clrun_train_step without a hook, bit for bit. Without a split step,
 * or with another count, CLRUN_ERROR_INVALID_ARGUMENT; a loss that comes out NaN or infinite
 * fails clrun_train_gradients with CLRUN_ERROR_INVALID_ARGUMENT (the gradients are written). */
uint64_t clrun_train_gradient_count(const clrun_train *train);
clrun_status clrun_train_gradients(clrun_train *train, const void *const *feeds, int32_t count,
                                   float *gradients, uint64_t gradient_count,
                                   clrun_train_step_result *result);
clrun_status clrun_train_apply(clrun_train *train, const float *gradients, uint64_t count);

typedef struct clrun_train_eval_result {
    double loss;     /* the mean loss over the rows evaluated */
    int64_t correct; /* xent: rows whose largest logit is the label's; -1 for other losses */
    int64_t rows;    /* xent: the rows evaluated (elements of the labels); -1 for other losses */
} clrun_train_eval_result;

/* The model and its loss with the current parameters, nothing updated: feeds as for a step.
 * For xent, only the first `rows` rows of the batch count (1 to the batch; the rest must still
 * hold valid feeds, a copy of a real row, say), so that a last partial batch of a test set is
 * evaluated exactly; other losses take whole batches (rows -1). */
clrun_status clrun_train_evaluate(clrun_train *train, const void *const *feeds, int32_t count,
                                  int64_t rows, clrun_train_eval_result *result);

/* The parameters, in the step graph's input order: their count, name (the model's) and type,
 * and their current values copied to host memory of `bytes` (exactly the type's bytes). */
int32_t clrun_train_param_count(const clrun_train *train);
clrun_status clrun_train_param_info(const clrun_train *train, int32_t i, const char **name,
                                    clrun_tensor_type *type);
clrun_status clrun_train_read_param(clrun_train *train, int32_t i, void *host, uint64_t bytes);
/* The gradient parameter i had in the last step, when the trainer was made with
 * keep_gradients (CLRUN_ERROR_INVALID_ARGUMENT otherwise, or before the first step); with a
 * reduce hook, this process's gradient, before the reduction. */
clrun_status clrun_train_read_gradient(clrun_train *train, int32_t i, void *host, uint64_t bytes);

/* The trainer's tensors that come from the model: its parameters, then the running statistics
 * of its batch norms (what a trained model holds that the model file held): count, name (the
 * model's) and type, and current values. For writing the trained model back
 * (clrun_onnx_save_initializers). */
int32_t clrun_train_model_tensor_count(const clrun_train *train);
clrun_status clrun_train_model_tensor_info(const clrun_train *train, int32_t i, const char **name,
                                           clrun_tensor_type *type);
clrun_status clrun_train_read_model_tensor(clrun_train *train, int32_t i, void *host,
                                           uint64_t bytes);

/* The learning rate of the steps from now on (a schedule); > 0. The step graph takes it as an
 * input, so nothing is rebuilt. */
clrun_status clrun_train_set_lr(clrun_train *train, double lr);

/* The train state (parameters, optimizer state, steps done, optimizer kind) to a file, and back.
 * A state read back gives the same next step, bit for bit. Loading checks the whole file against
 * the trainer before changing anything: CLRUN_ERROR_INVALID_ARGUMENT naming the first tensor that
 * differs (a state of another model or optimizer), CLRUN_ERROR_PARSE for a damaged file,
 * CLRUN_ERROR_IO when it cannot be read or written. */
clrun_status clrun_train_save(clrun_train *train, const char *path);
clrun_status clrun_train_load(clrun_train *train, const char *path);

typedef struct clrun_train_stats {
    uint64_t steps;              /* steps done */
    int32_t params;              /* parameter tensors */
    int32_t state_tensors;       /* optimizer state tensors */
    uint64_t param_bytes;        /* the parameters' bytes */
    uint64_t state_bytes;        /* the optimizer state's bytes */
    uint64_t peak_bytes;         /* last step: most bytes held at once (state included) */
    uint64_t activation_peak_bytes; /* peak_bytes less the parameters and state */
    uint64_t lower_bound_bytes;  /* the step's lower bound (live bytes at its fullest step) */
    uint64_t donated_bytes;      /* bytes of state written in place per step: what a step
                                    without donation would hold twice */
    int32_t donations;           /* outputs written in place of a dying input, per step (with
                                    a reduce hook, the updates' too) */
    int32_t donated_in_place;    /* of them, those written in place of donated state (the
                                    parameters and the optimizer's state) */
    int32_t unused_donations;    /* donated inputs no output could take (0 when it works) */
    clrun_remat_report remat;    /* what the step's rematerialisation policy did */
    const char *remat_policy;    /* that policy ("none" without one); valid with the trainer */
    uint64_t planned_peak_bytes; /* under a memory budget (given, or the pool's limit): what
                                    the trainer holds, the bytes the budget was held to
                                    (train_graph.h); else 0 */
    uint64_t host_bytes;         /* under a budget that the device alone cannot meet: the
                                    optimizer state (and then the parameters) kept in host
                                    memory the device maps, which kernels use where it is;
                                    else 0 */
    clrun_exec_stats exec;       /* the step executor's own figures */
    /* (appended) */
    bool remat_auto;             /* remat_policy was chosen by the step: no policy was given
                                    (clrun_train_graph_options.remat NULL or "") and no budget
                                    binds, and recomputing lowered the step's lower bound enough
                                    at little arithmetic (docs/training.md); "none" turns it off */
} clrun_train_stats;

clrun_status clrun_train_stats_get(const clrun_train *train, clrun_train_stats *out);

/* The names of donated state tensors that no output of the step could take in place (0 when
 * donation works as it should; clrun_exec_unused_donations of the step's executor). */
int32_t clrun_train_unused_donations(const clrun_train *train, const char *const **names);

/* One bucket of a bucketed reduction in the last step. Its times are on the step executor's
 * profile timeline (clrun_exec_profile: ns from its first node's start; with exec.profile,
 * else 0): the host's clock placed on the device's by the earliest that the host saw a
 * bucket's gradients read after the device finished reading them (the placement errs by at
 * most the polling interval, early). */
typedef struct clrun_train_bucket {
    uint64_t first;     /* its first float in the bucket order, and its floats */
    uint64_t count;
    int32_t params;     /* parameters in it */
    int32_t step;       /* the schedule step that completes its last gradient */
    uint64_t ready_ns;  /* its gradients in host memory (device clock: the reads' end) */
    uint64_t start_ns;  /* bucket_start called */
    uint64_t end_ns;    /* bucket_test first said done */
    /* Where the step's executor laid the bucket's gradients out back to back in device memory
     * (contiguous), one read takes the whole bucket, each gradient at an offset aligned to the
     * device's base address alignment, with `padding` floats between them; the gradients are
     * then copied to bucket_start's floats without it (count is the same either way, so every
     * process reduces the same floats whatever its device's alignment). Else (an out-of-order
     * queue, loops, a memory budget, bucket_per_gradient) each gradient is read on its own. */
    bool contiguous;    /* one device region (decided at creation) */
    uint64_t padding;   /* floats of alignment padding read with it (not reduced) */
    int32_t reads;      /* device reads that brought its gradients in, in the last step */
} clrun_train_bucket;

/* The buckets of a bucketed reduction (their figures of the last step); 0 without one.
 * *buckets stays valid until the next step or clrun_train_destroy. */
int32_t clrun_train_buckets(const clrun_train *train, const clrun_train_bucket **buckets);

/* The step graph (for writing it out, or planning it); valid as long as the trainer. */
const clrun_graph *clrun_train_step_graph(const clrun_train *train);

/* The step's executor (NULL for a NULL trainer), valid as long as the trainer: its statistics
 * and layout, and with clrun_train_options.exec.profile the spans of the last step
 * (clrun_exec_profile; a recomputed node's output is named "NAME.remat", remat.h). */
const clrun_exec *clrun_train_step_exec(const clrun_train *train);

/* Parameters asked for by name that the loss does not depend on: they stay as they are (and the
 * log warns). *names points into the trainer. */
int32_t clrun_train_frozen(const clrun_train *train, const char *const **names);

#ifdef __cplusplus
}
#endif
#endif
