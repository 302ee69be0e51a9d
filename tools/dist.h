/* Data parallelism for clrun train: one process per device, each training on its share of
 * every global batch, the gradients all-reduced between the backward pass and the update
 * (clrun_train_options.reduce). Over Open MPI where configure found it (dist_mpi.c, over
 * libclrun-mpi: <clrun/mpi.h>); else one process alone (dist_none.c), which refuses to run
 * under mpirun rather than train N times. libclrun itself knows nothing of MPI. */
#ifndef CLRUN_TOOLS_DIST_H
#define CLRUN_TOOLS_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <clrun/status.h>

#include "det_sum.h"

struct clrun_mpi;

typedef struct clrun_cli_dist {
    int rank, size;     /* 0 and 1 for one process */
    double timeout_s;   /* how long a collective may wait for the others */
    double weight;      /* this rank's share of the global batch: local rows / global rows */
    bool started;       /* MPI is initialised (and must be finalised) */
    uint64_t reduces;   /* gradient reductions done (all-reduces, or --deterministic's sums) */
    double reduce_s;    /* their wall time in all, from the call to the reduced gradients */
    double last_reduce_s; /* the last one's */
    struct clrun_mpi *mpi; /* libclrun-mpi's handle under mpirun, else NULL */
} clrun_cli_dist;

/* Whether this build runs under mpirun (configure found MPI). */
bool clrun_cli_dist_built(void);

/* Joins the job when the process is one of several that mpirun started (Open MPI's
 * OMPI_COMM_WORLD_SIZE above 1); else d is one process alone. 0, or an exit status with the
 * reason printed (a build without MPI under mpirun). */
int clrun_cli_dist_start(clrun_cli_dist *d, double timeout_s);

/* The reduce hook (user: the clrun_cli_dist): each rank's gradients times its weight, summed
 * over the ranks: the gradient of the mean loss over the global batch. A collective that does
 * not complete within the timeout probes the other ranks: it fails the step naming those that
 * do not answer (clrun train then ends the job: clrun_cli_dist_abort, since a hung peer cannot
 * be waited out), or waits on when all do (clrun_mpi_reduce). */
clrun_status clrun_cli_dist_reduce(void *user, uint64_t step, float *gradients, uint64_t count,
                                   char *err, size_t errlen);

/* The bucketed reduction's hooks (clrun_train_options.bucket_start, bucket_test; user: the
 * clrun_cli_dist): each bucket as clrun_cli_dist_reduce reduces the gradients, element for
 * element the same arithmetic, started (MPI_Iallreduce) as soon as it is in host memory and
 * polled until done, each under the timeout. Without MPI (or alone), nothing to do. Their
 * span, from the first bucket's start to the last one done, is the step's reduce time. */
clrun_status clrun_cli_dist_bucket_start(void *user, uint64_t step, int32_t bucket,
                                         float *gradients, uint64_t count, char *err,
                                         size_t errlen);
clrun_status clrun_cli_dist_bucket_test(void *user, uint64_t step, int32_t bucket, bool *done,
                                        char *err, size_t errlen);

/* values summed over the ranks in place, under the same timeout (what: for its message). */
void clrun_cli_dist_sum(clrun_cli_dist *d, double *values, int count, const char *what);

/* --deterministic: the sum of the chunk gradients of a global batch of `chunks` chunks in the
 * tree's order (det_sum.h), tree holding the sums of this rank's share of them
 * (clrun_cli_share) as it streamed them: the other ranks' sums gathered to rank 0, which merges
 * and folds them, and the result broadcast. Alone, the fold. The result (tree->count floats)
 * lives in tree's buffers until the next push; NULL with the reason in err when out of host
 * memory or for more values than one collective takes. A rank that does not take part within
 * the timeout ends the job (what: for its message). */
const float *clrun_cli_dist_tree_sum(clrun_cli_dist *d, clrun_cli_tree *tree, int64_t chunks,
                                     const char *what, char *err, size_t errlen);

/* Ends the job on an error of this rank, so that the others do not wait for it. */
void clrun_cli_dist_abort(clrun_cli_dist *d, int code);

/* Leaves the job (MPI_Finalize). */
void clrun_cli_dist_finish(clrun_cli_dist *d);

#endif
