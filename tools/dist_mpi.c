/* clrun train over Open MPI, through libclrun-mpi (<clrun/mpi.h>), which holds the
 * collectives, their timeout and the probes of the other ranks: this file adapts it to the CLI
 * (tools/dist.h), whose options may change the weight and the timeout between calls, and ends
 * the job (MPI_Abort) with the reason printed when a collective fails, since a rank that
 * stops waiting would leave the others hanging. --deterministic's gather and broadcast are the
 * CLI's own, waited for under the same timeout (clrun_mpi_wait). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include <clrun/mpi.h>

#include "dist.h"

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
    if (clrun_mpi_create(NULL, &d->mpi) != CLRUN_OK) {
        fprintf(stderr, "clrun train: %s\n", clrun_mpi_last_error());
        return 1;
    }
    d->started = true;
    d->rank = clrun_mpi_rank(d->mpi);
    d->size = clrun_mpi_size(d->mpi);
    return 0;
}

/* The CLI's weight and timeout (it sets them in d) into the library's handle. */
static void sync_settings(clrun_cli_dist *d)
{
    (void)clrun_mpi_set_weight(d->mpi, d->weight);
    (void)clrun_mpi_set_timeout(d->mpi, d->timeout_s);
}

/* The library's reduction figures into d (what --json reports). */
static void sync_stats(clrun_cli_dist *d)
{
    clrun_mpi_stats st;
    clrun_mpi_stats_get(d->mpi, &st);
    d->reduces = st.reduces;
    d->reduce_s = st.reduce_s;
    d->last_reduce_s = st.last_reduce_s;
}

/* A collective that failed or timed out: the reason printed, the job ended. */
static void end_job(clrun_cli_dist *d)
{
    fprintf(stderr, "clrun train: %s (--mpi-timeout); aborting the job\n",
            clrun_mpi_last_error());
    fflush(stdout);
    fflush(stderr);
    clrun_mpi_abort(d->mpi, 3);
}

static void wait_or_end(clrun_cli_dist *d, MPI_Request *req, int rc, const char *what)
{
    sync_settings(d);
    if (clrun_mpi_wait(d->mpi, req, rc, what) != CLRUN_OK)
        end_job(d);
}

clrun_status clrun_cli_dist_reduce(void *user, uint64_t step, float *gradients, uint64_t count,
                                   char *err, size_t errlen)
{
    clrun_cli_dist *d = user;
    if (d->size <= 1)
        return CLRUN_OK;
    sync_settings(d);
    clrun_status s = clrun_mpi_reduce(d->mpi, step, gradients, count, err, errlen);
    sync_stats(d);
    return s;
}

clrun_status clrun_cli_dist_bucket_start(void *user, uint64_t step, int32_t bucket,
                                         float *gradients, uint64_t count, char *err,
                                         size_t errlen)
{
    clrun_cli_dist *d = user;
    if (d->mpi == NULL)
        return CLRUN_OK;
    sync_settings(d);
    clrun_status s = clrun_mpi_bucket_start(d->mpi, step, bucket, gradients, count, err, errlen);
    sync_stats(d);
    return s;
}

clrun_status clrun_cli_dist_bucket_test(void *user, uint64_t step, int32_t bucket, bool *done,
                                        char *err, size_t errlen)
{
    clrun_cli_dist *d = user;
    *done = true;
    if (d->mpi == NULL)
        return CLRUN_OK;
    clrun_status s = clrun_mpi_bucket_test(d->mpi, step, bucket, done, err, errlen);
    sync_stats(d);
    return s;
}

const float *clrun_cli_dist_tree_sum(clrun_cli_dist *d, clrun_cli_tree *tree, int64_t chunks,
                                     const char *what, char *err, size_t errlen)
{
    if (d->size <= 1)
        return clrun_cli_tree_fold(tree);
    double start = MPI_Wtime();
    uint64_t p = tree->count, total = 0;
    int *counts = calloc((size_t)d->size * 2, sizeof *counts);
    int64_t *lo = NULL;
    int *level = NULL, blocks = 0, most = 0;
    float *buf = NULL;
    const float *result = NULL;
    if (counts == NULL)
        goto oom;
    /* every rank's blocks, from the shares alone: nothing to exchange first */
    for (int q = 0; q < d->size; q++) {
        int64_t first, end;
        (void)clrun_cli_share(chunks, d->size, q, &first, &end); /* chunks >= ranks */
        int n = clrun_cli_tree_blocks(first, end, NULL, NULL, 0);
        most = n > most ? n : most;
        if (q == d->rank)
            blocks = n;
        if (q > 0)
            total += (uint64_t)n * p;
        if (total > (uint64_t)INT32_MAX) { /* one collective: an int count of floats */
            snprintf(err, errlen, "%llu gradient values to gather: more than one collective takes",
                     (unsigned long long)total);
            free(counts);
            return NULL;
        }
        counts[q] = q > 0 ? n * (int)p : 0;
        counts[d->size + q] = q > 0 ? (int)(total - (uint64_t)counts[q]) : 0;
    }
    if (blocks != tree->depth) {
        snprintf(err, errlen, "rank %d holds %d sums of its chunks, %d expected", d->rank,
                 tree->depth, blocks);
        free(counts);
        return NULL;
    }
    lo = malloc(sizeof *lo * (size_t)most);
    level = malloc(sizeof *level * (size_t)most);
    buf = malloc(sizeof *buf * (size_t)(d->rank == 0 ? (total ? total : 1) : (uint64_t)blocks * p));
    if (lo == NULL || level == NULL || buf == NULL)
        goto oom;
    for (int k = 0; d->rank > 0 && k < blocks; k++)
        memcpy(buf + (uint64_t)k * p, tree->sum[k], sizeof *buf * p);
    MPI_Request req;
    int rc = MPI_Igatherv(d->rank > 0 ? buf : MPI_IN_PLACE, d->rank > 0 ? blocks * (int)p : 0,
                          MPI_FLOAT, buf, counts,
                          counts + d->size, MPI_FLOAT, 0, clrun_mpi_comm(d->mpi), &req);
    wait_or_end(d, &req, rc, what);
    float *out;
    if (d->rank == 0) {
        /* the other ranks' blocks after this one's, in chunk order: the same merges */
        const float *at = buf;
        for (int q = 1; q < d->size; q++) {
            int64_t first, end;
            (void)clrun_cli_share(chunks, d->size, q, &first, &end); /* chunks >= ranks */
            int n = clrun_cli_tree_blocks(first, end, lo, level, most);
            for (int k = 0; k < n; k++, at += p)
                if (!clrun_cli_tree_push_copy(tree, at, lo[k], level[k]))
                    goto oom;
        }
        out = (float *)clrun_cli_tree_fold(tree);
    } else {
        clrun_cli_tree_reset(tree);
        out = clrun_cli_tree_next(tree);
        if (out == NULL)
            goto oom;
    }
    rc = MPI_Ibcast(out, (int)p, MPI_FLOAT, 0, clrun_mpi_comm(d->mpi), &req);
    wait_or_end(d, &req, rc, what);
    result = out;
    d->last_reduce_s = MPI_Wtime() - start; /* the library's figures count its hooks' only */
    d->reduce_s += d->last_reduce_s;
    d->reduces++;
    goto done;
oom:
    snprintf(err, errlen, "out of host memory for the sums of the chunks");
done:
    free(counts);
    free(lo);
    free(level);
    free(buf);
    return result;
}

void clrun_cli_dist_sum(clrun_cli_dist *d, double *values, int count, const char *what)
{
    if (d->size <= 1)
        return;
    sync_settings(d);
    if (clrun_mpi_sum(d->mpi, values, count, what) != CLRUN_OK)
        end_job(d);
}

void clrun_cli_dist_abort(clrun_cli_dist *d, int code)
{
    if (d->started && d->size > 1) {
        fflush(stdout);
        fflush(stderr);
        clrun_mpi_abort(d->mpi, code ? code : 1);
    }
}

void clrun_cli_dist_finish(clrun_cli_dist *d)
{
    if (!d->started)
        return;
    clrun_mpi_destroy(d->mpi); /* it initialised MPI: it finalises it */
    d->mpi = NULL;
    d->started = false;
}
