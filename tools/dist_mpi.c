/* clrun train over Open MPI: every collective is non-blocking and polled against the timeout,
 * and beside each one every rank tells rank 0 that it arrived (and rank 0 tells every rank), so
 * that a collective that does not complete names the ranks that never reached it: a dead or
 * hung peer ends the job (MPI_Abort) instead of hanging the others. That is one small message
 * per rank per collective, and rank 0 handles N - 1 of them. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "dist.h"

#define ARRIVAL_TAG 2801

static MPI_Comm comm = MPI_COMM_NULL; /* the job's, duplicated: no other code's messages */
static uint64_t sequence;             /* collectives so far, the same on every rank */

bool clrun_cli_dist_built(void)
{
    return true;
}

int clrun_cli_dist_start(clrun_cli_dist *d, double timeout_s)
{
    *d = (clrun_cli_dist){.rank = 0, .size = 1, .timeout_s = timeout_s, .weight = 1.0};
    const char *size = getenv("OMPI_COMM_WORLD_SIZE");
    if (size == NULL || atoi(size) <= 1)
        return 0; /* alone: no MPI at all */
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
        fprintf(stderr, "clrun train: MPI_Init failed\n");
        return 1;
    }
    d->started = true;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &d->rank);
    MPI_Comm_size(comm, &d->size);
    return 0;
}

static void pause_briefly(void)
{
    struct timespec ts = {0, 200000}; /* 0.2 ms */
    nanosleep(&ts, NULL);
}

/* buf (count of type) summed over the ranks in place, or the job ended with the reason. */
static void sum(clrun_cli_dist *d, void *buf, int count, MPI_Datatype type, const char *what)
{
    int peers = d->rank == 0 ? d->size - 1 : 1, k = 0;
    MPI_Request *req = malloc(sizeof *req * (size_t)(2 * peers + 1));
    uint64_t *arrived = calloc((size_t)peers, sizeof *arrived);
    uint64_t mine = ++sequence;
    if (req == NULL || arrived == NULL) {
        fprintf(stderr, "clrun train: rank %d: out of host memory\n", d->rank);
        MPI_Abort(comm, 1);
    }
    int rc = MPI_SUCCESS;
    for (int p = 0; p < peers && rc == MPI_SUCCESS; p++) {
        int peer = d->rank == 0 ? p + 1 : 0;
        rc = MPI_Irecv(&arrived[p], 1, MPI_UINT64_T, peer, ARRIVAL_TAG, comm, &req[k++]);
        if (rc == MPI_SUCCESS)
            rc = MPI_Isend(&mine, 1, MPI_UINT64_T, peer, ARRIVAL_TAG, comm, &req[k++]);
    }
    if (rc == MPI_SUCCESS)
        rc = MPI_Iallreduce(MPI_IN_PLACE, buf, count, type, MPI_SUM, comm, &req[k++]);
    double start = MPI_Wtime();
    int done = 0;
    while (rc == MPI_SUCCESS && !done) {
        rc = MPI_Testall(k, req, &done, MPI_STATUSES_IGNORE);
        if (rc == MPI_SUCCESS && !done) {
            if (MPI_Wtime() - start > d->timeout_s)
                break;
            pause_briefly();
        }
    }
    if (rc != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        MPI_Error_string(rc, text, &len);
        fprintf(stderr, "clrun train: rank %d: %s failed: %s; aborting the job\n", d->rank, what,
                text);
        fflush(stderr);
        MPI_Abort(comm, 1);
    }
    if (!done) {
        /* who never arrived: rank 0 knows of every rank, the others of rank 0 */
        char missing[512] = "";
        size_t used = 0;
        int count_missing = 0;
        for (int p = 0; p < peers; p++) {
            int got = 0;
            MPI_Test(&req[2 * p], &got, MPI_STATUS_IGNORE);
            if (!got && used < sizeof missing - 16) {
                used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%d",
                                         count_missing ? ", " : "", d->rank == 0 ? p + 1 : 0);
                count_missing++;
            }
        }
        if (count_missing > 0)
            fprintf(stderr, "clrun train: rank %d: %s did not complete within %g s "
                    "(--mpi-timeout): rank%s %s never reached it (dead or hung); aborting the "
                    "job\n", d->rank, what, d->timeout_s, count_missing > 1 ? "s" : "", missing);
        else
            fprintf(stderr, "clrun train: rank %d: %s did not complete within %g s "
                    "(--mpi-timeout): a rank is dead or hung (rank 0 names it); aborting the job\n",
                    d->rank, what, d->timeout_s);
        fflush(stderr);
        MPI_Abort(comm, 3);
    }
    free(req);
    free(arrived);
}

clrun_status clrun_cli_dist_reduce(void *user, uint64_t step, float *gradients, uint64_t count,
                                   char *err, size_t errlen)
{
    clrun_cli_dist *d = user;
    if (d->size <= 1)
        return CLRUN_OK;
    if (count > (uint64_t)INT32_MAX) { /* one collective: an int count of floats */
        snprintf(err, errlen, "%llu gradient values: more than one all-reduce takes",
                 (unsigned long long)count);
        return CLRUN_ERROR_INVALID_ARGUMENT;
    }
    for (uint64_t i = 0; i < count; i++)
        gradients[i] = (float)((double)gradients[i] * d->weight);
    char what[96];
    snprintf(what, sizeof what, "the gradient all-reduce of step %llu", (unsigned long long)step);
    sum(d, gradients, (int)count, MPI_FLOAT, what);
    return CLRUN_OK;
}

void clrun_cli_dist_sum(clrun_cli_dist *d, double *values, int count, const char *what)
{
    if (d->size > 1)
        sum(d, values, count, MPI_DOUBLE, what);
}

void clrun_cli_dist_abort(clrun_cli_dist *d, int code)
{
    if (d->started && d->size > 1) {
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(comm, code ? code : 1);
    }
}

void clrun_cli_dist_finish(clrun_cli_dist *d)
{
    if (!d->started)
        return;
    MPI_Comm_free(&comm);
    MPI_Finalize();
    d->started = false;
}
