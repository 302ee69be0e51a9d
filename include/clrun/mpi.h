/* clrun over MPI: data-parallel training, one process (rank) per device, each training on its
 * share of every global batch, the gradients all-reduced between the backward pass and the
 * update through the reduce hooks of <clrun/train.h>. A separate library, libclrun-mpi (built
 * when configure finds Open MPI; pkg-config clrun-mpi), so that libclrun itself stays free of
 * MPI. See docs/distributed.md.
 *
 *     clrun_mpi *dp;
 *     clrun_mpi_create(NULL, &dp);                  // MPI_COMM_WORLD, MPI_Init if needed
 *     int64_t first, rows;
 *     clrun_mpi_share(dp, 256, &first, &rows);      // this rank's rows of each batch of 256
 *     clrun_train_options opt;
 *     clrun_train_options_init(&opt);
 *     ...                                           // loss, optimizer: as alone
 *     clrun_mpi_train_options(dp, &opt, 1 << 20);   // the all-reduce hooks, 1 MiB buckets
 *     clrun_train_create(ctx, graph, &opt, &train); // a model whose batch is `rows`
 *     ...                                           // steps on rows [first, first + rows)
 *     clrun_train_destroy(train);
 *     clrun_mpi_destroy(dp);                        // MPI_Finalize if clrun called MPI_Init
 *                                                   // and this was the last handle
 *
 * Every rank's gradient is the mean over its rows; the hooks scale it by the rank's share of
 * the global batch (rows / global rows) and sum over the ranks (MPI_Iallreduce on a duplicate
 * of the communicator), which is the gradient of the mean loss over the global batch: N ranks
 * end with the parameters of one process at the same global batch, within rounding.
 *
 * Every collective is non-blocking and polled against a timeout. While it polls, a rank answers
 * the others' probes; when one has not completed within the timeout, the rank probes the
 * others: when all answer it waits on, else the call fails naming those that did not answer
 * (dead or hung). A collective that failed or timed out breaks the handle (every later call
 * fails at once with the same message): the other ranks may be stuck in it, so the caller's
 * one safe move is clrun_mpi_abort, which ends the whole job. Functions that fail set the
 * message clrun_mpi_last_error returns; none prints or aborts on its own.
 *
 * A collective given up is left in flight, still writing into its buffer: after a step failed
 * on a broken handle (clrun_mpi_broken), the trainer's gradient buffer may be written by MPI
 * after the step returned, so call clrun_mpi_abort BEFORE clrun_train_destroy (which frees that
 * buffer), or never destroy that trainer (leak it, as Python's clrun does). The hooks break
 * clrun_train_bucket_test_fn's rule here (a failed bucket_test leaves nothing writing): MPI has
 * no way to cancel a collective.
 *
 * Threads: a handle is used by one thread at a time (the train step's hooks run on the thread
 * that calls clrun_train_step), which need not be the one that created it. MPI must allow that:
 * when clrun initialises MPI it asks for MPI_THREAD_SERIALIZED and fails when MPI provides less;
 * a caller that initialises MPI itself asks for MPI_THREAD_SERIALIZED (or MULTIPLE), or else,
 * under FUNNELED or SINGLE, uses every handle on MPI's main thread only (clrun_mpi_create
 * refuses another thread then, but cannot see later calls). */
#ifndef CLRUN_MPI_H
#define CLRUN_MPI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include <clrun/status.h>
#include <clrun/train.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A data-parallel group: a duplicate of a communicator, this rank's share of the global batch,
 * the timeout, the reduction's figures and the collectives in flight. */
typedef struct clrun_mpi clrun_mpi;

/* A handle over *comm (duplicated: clrun's messages never mix with the caller's), or over
 * MPI_COMM_WORLD when comm is NULL. MPI is initialised (MPI_Init_thread) when it is not yet;
 * when clrun initialised it, the destruction of the last live handle (of all of them, whichever
 * initialised MPI) finalises it (MPI_Finalize), unless a handle broke (the job is to end by
 * clrun_mpi_abort). A caller that initialised MPI itself finalises it itself, after destroying
 * its handles: a handle used after MPI_Finalize fails (CLRUN_ERROR_INVALID_ARGUMENT, "MPI is
 * finalised") instead of calling MPI. A lasting side effect on Linux: the calling thread's
 * timer slack is set to 1 us (prctl PR_SET_TIMERSLACK; the polls sleep microseconds) and stays
 * so after the handle's destruction; a caller that minds saves it (PR_GET_TIMERSLACK) and
 * restores it. Fails with
 * CLRUN_ERROR_INVALID_ARGUMENT for MPI_COMM_NULL, a communicator MPI refuses, an
 * intercommunicator, or after MPI_Finalize, and with CLRUN_ERROR_UNSUPPORTED for a thread level
 * below MPI_THREAD_SERIALIZED (see Threads above); *out is then NULL and nothing is leaked. The
 * timeout starts at 60 s and the weight at 1 (each rank's gradient counts in full) until
 * clrun_mpi_share or clrun_mpi_set_weight. Collective over the communicator. */
clrun_status clrun_mpi_create(const MPI_Comm *comm, clrun_mpi **out);

/* clrun_mpi_create with a communicator's Fortran handle (MPI_Comm_c2f; mpi4py's comm.py2f()),
 * for bindings that have no C handle: Python's clrun.mpi through ctypes. A value that names no
 * communicator fails as MPI_COMM_NULL does. */
clrun_status clrun_mpi_create_fortran(MPI_Fint comm, clrun_mpi **out);

/* Frees the duplicate communicator and the handle; finalises MPI when clrun initialised it
 * and no other handle is left (see clrun_mpi_create). Collective (MPI_Comm_free). NULL is fine.
 * A broken handle is freed without collectives. */
void clrun_mpi_destroy(clrun_mpi *mpi);

/* The last failure message of this thread's clrun_mpi calls (thread-local, valid until its
 * next failing call); "" when none failed. The hooks hand theirs to the train step instead. */
const char *clrun_mpi_last_error(void);

/* Whether a collective failed or timed out on the handle, breaking it (false for NULL): then
 * only clrun_mpi_abort is safe, and the trainers whose hooks used it must not be destroyed
 * before it (see above). */
bool clrun_mpi_broken(const clrun_mpi *mpi);

/* This process's rank in the communicator, and the communicator's size (the ranks); -1 for a
 * NULL handle. */
int clrun_mpi_rank(const clrun_mpi *mpi);
int clrun_mpi_size(const clrun_mpi *mpi);

/* The handle's communicator (a duplicate of the one given), for the caller's own collectives on
 * clrun's terms (clrun_mpi_wait). Freed by clrun_mpi_destroy. MPI_COMM_NULL for a NULL
 * handle. */
MPI_Comm clrun_mpi_comm(const clrun_mpi *mpi);

/* Rank r of N takes rows [first, first + rows) of every global batch of global_rows rows:
 * floor(global_rows / N) rows, one more on the first global_rows mod N ranks, contiguous in
 * rank order (clrun train's split). Also sets the rank's weight to rows / global_rows. Fails
 * with CLRUN_ERROR_INVALID_ARGUMENT, changing nothing, when global_rows is less than the ranks
 * (a rank would have no row). first or rows may be NULL. */
clrun_status clrun_mpi_share(clrun_mpi *mpi, int64_t global_rows, int64_t *first, int64_t *rows);

/* The factor this rank's gradients are scaled by before the sum: its rows over the global
 * batch's (clrun_mpi_share sets it). In (0, 1], else CLRUN_ERROR_INVALID_ARGUMENT (so is a
 * NULL handle). clrun_mpi_weight of a NULL handle is 0. */
clrun_status clrun_mpi_set_weight(clrun_mpi *mpi, double weight);
double clrun_mpi_weight(const clrun_mpi *mpi);

/* Seconds a collective may wait for the other ranks before they are probed (> 0, finite;
 * default 60; a NULL handle fails with CLRUN_ERROR_INVALID_ARGUMENT). clrun_mpi_timeout of a
 * NULL handle is 0. */
clrun_status clrun_mpi_set_timeout(clrun_mpi *mpi, double seconds);
double clrun_mpi_timeout(const clrun_mpi *mpi);

/* Sets options' hooks to this handle's all-reduce: with bucket_bytes > 0, in buckets of at
 * least that many bytes (options->bucket_bytes; clrun train's default is 1 MiB), each
 * all-reduced (MPI_Iallreduce) as soon as the backward pass has completed it, while the rest
 * runs; with 0, one all-reduce after the backward pass. Both give the same sums per element.
 * The handle must outlive every train step made with these options. On one rank nothing is
 * reduced and the hooks only split the step (see clrun_train_options.reduce). The reductions of
 * the first two steps the handle sees are checked against the other ranks' (a small all-reduce
 * before each): ranks that would reduce different gradients (another model, other buckets, a
 * schedule that completes them in another order) fail that step together, before it reduces
 * anything more, with CLRUN_ERROR_INVALID_ARGUMENT naming the difference. */
clrun_status clrun_mpi_train_options(clrun_mpi *mpi, clrun_train_options *options,
                                     uint64_t bucket_bytes);

/* The hooks themselves (user: the clrun_mpi), for callers that set clrun_train_options by hand:
 * clrun_train_reduce_fn, clrun_train_bucket_start_fn and clrun_train_bucket_test_fn. */
clrun_status clrun_mpi_reduce(void *user, uint64_t step, float *gradients, uint64_t count,
                              char *err, size_t errlen);
clrun_status clrun_mpi_bucket_start(void *user, uint64_t step, int32_t bucket, float *gradients,
                                    uint64_t count, char *err, size_t errlen);
clrun_status clrun_mpi_bucket_test(void *user, uint64_t step, int32_t bucket, bool *done,
                                   char *err, size_t errlen);

/* values (count doubles) summed over the ranks in place, under the timeout (what: for the
 * message, e.g. "the epoch's loss"). Collective. A NULL handle, like one used after
 * MPI_Finalize, fails with CLRUN_ERROR_INVALID_ARGUMENT (so do clrun_mpi_wait and the hooks). */
clrun_status clrun_mpi_sum(clrun_mpi *mpi, double *values, int count, const char *what);

/* Waits for a request of a collective on clrun_mpi_comm that the call giving rc started, under
 * the timeout and its probes (what: for the message); *req is MPI_REQUEST_NULL after. */
clrun_status clrun_mpi_wait(clrun_mpi *mpi, MPI_Request *req, int rc, const char *what);

/* The gradient reductions so far: how many, their wall time in all and the last one's, each
 * from the first bucket's start (or the reduce hook's call) to the reduced gradients, so that
 * it counts the wait for the slowest rank as well as the transfer. */
typedef struct clrun_mpi_stats {
    uint64_t reduces;
    double reduce_s;
    double last_reduce_s;
} clrun_mpi_stats;
/* Zeros for a NULL handle; a NULL stats is ignored. */
void clrun_mpi_stats_get(const clrun_mpi *mpi, clrun_mpi_stats *stats);

/* Ends the whole job (MPI_Abort on the handle's communicator, code 0 taken as 1): what a rank
 * does after a failed collective, or after an error of its own that the others would wait on.
 * Returns only when MPI is not running (never initialised, or finalised). */
void clrun_mpi_abort(clrun_mpi *mpi, int code);

#ifdef __cplusplus
}
#endif
#endif
