/* clrun train over Open MPI: every collective is non-blocking and polled against the timeout.
 * While it polls, a rank answers the others' probes; when its collective has not completed
 * within the timeout, it probes every other rank and names those that do not answer within a
 * grace period (dead, hung, or stuck outside any collective), then ends the job (MPI_Abort)
 * instead of hanging; when all answer, it waits on. Probes cost nothing until a timeout. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <mpi.h>

#include "dist.h"

#define PROBE_TAG 2801
#define ANSWER_TAG 2802
#define GRACE_S 2.0 /* how long a timed-out rank waits for answers (at most half the timeout) */

static MPI_Comm comm = MPI_COMM_NULL; /* the job's, duplicated: no other code's messages */

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
#ifdef PR_SET_TIMERSLACK
    prctl(PR_SET_TIMERSLACK, 1000UL); /* the polls' short sleeps: 1 us late, not Linux's 50 */
#endif
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &d->rank);
    MPI_Comm_size(comm, &d->size);
    return 0;
}

/* Answers the probes other ranks sent: I am alive and polling. */
static void answer_probes(void)
{
    for (;;) {
        int pending = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, PROBE_TAG, comm, &pending, &st) != MPI_SUCCESS || !pending)
            return;
        static const int alive = 1; /* static: the send outlives this call */
        int probe = 0;
        MPI_Recv(&probe, 1, MPI_INT, st.MPI_SOURCE, PROBE_TAG, comm, MPI_STATUS_IGNORE);
        MPI_Request r;
        if (MPI_Isend(&alive, 1, MPI_INT, st.MPI_SOURCE, ANSWER_TAG, comm, &r) == MPI_SUCCESS)
            MPI_Request_free(&r);
    }
}

/* After a timeout: the ranks that do not answer a probe within the grace period, into
 * missing (a list like "1, 3"); their count. */
static int unanswered(clrun_cli_dist *d, char *missing, size_t size)
{
    static const int probe = 1;
    int n = d->size, count = 0;
    MPI_Request *req = calloc((size_t)n * 2, sizeof *req);
    int *answers = calloc((size_t)n, sizeof *answers);
    if (req == NULL || answers == NULL) {
        free(req);
        free(answers);
        snprintf(missing, size, "?");
        return 1;
    }
    for (int q = 0; q < n; q++) {
        req[2 * q] = req[2 * q + 1] = MPI_REQUEST_NULL;
        if (q == d->rank)
            continue;
        MPI_Irecv(&answers[q], 1, MPI_INT, q, ANSWER_TAG, comm, &req[2 * q]);
        MPI_Isend(&probe, 1, MPI_INT, q, PROBE_TAG, comm, &req[2 * q + 1]);
    }
    double start = MPI_Wtime(), grace = d->timeout_s / 2 < GRACE_S ? d->timeout_s / 2 : GRACE_S;
    int done = 0;
    while (!done && MPI_Wtime() - start < grace) {
        answer_probes();
        done = 1;
        for (int q = 0; q < n; q++) {
            int got = 1;
            if (req[2 * q] != MPI_REQUEST_NULL)
                MPI_Test(&req[2 * q], &got, MPI_STATUS_IGNORE);
            done = done && got;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    size_t used = 0;
    missing[0] = '\0';
    for (int q = 0; q < n; q++)
        if (req[2 * q] != MPI_REQUEST_NULL && used + 16 < size) {
            used += (size_t)snprintf(missing + used, size - used, "%s%d", count ? ", " : "", q);
            count++;
        }
    /* the job ends: the requests are left to MPI_Abort */
    free(answers);
    free(req);
    return count;
}

/* A collective that failed (rc): the job ends with the reason. */
static void failed(clrun_cli_dist *d, int rc, const char *what)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, text, &len);
    fprintf(stderr, "clrun train: rank %d: %s failed: %s; aborting the job\n", d->rank, what,
            text);
    fflush(stderr);
    MPI_Abort(comm, 1);
}

/* One look at req, a collective waited for since *start: whether it is complete. Meanwhile
 * the other ranks' probes are answered; when the timeout has passed, the others are probed:
 * when one does not answer the job ends with the reason, when all do they are alive (a slow
 * one polls once it arrives) and the wait starts over. */
static bool poll_request(clrun_cli_dist *d, MPI_Request *req, double *start, const char *what)
{
    int done = 0;
    int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
        failed(d, rc, what);
    if (done)
        return true;
    answer_probes();
    if (MPI_Wtime() - *start > d->timeout_s) {
        char missing[512];
        if (unanswered(d, missing, sizeof missing) == 0) {
            *start = MPI_Wtime();
            return false;
        }
        fprintf(stderr, "clrun train: rank %d: %s did not complete within %g s "
                "(--mpi-timeout): rank%s %s did not answer (dead or hung); aborting the job\n",
                d->rank, what, d->timeout_s, strchr(missing, ',') ? "s" : "", missing);
        fflush(stderr);
        MPI_Abort(comm, 3);
    }
    return false;
}

/* Waits for req, the collective that the call giving rc started, or ends the job with the
 * reason (poll_request). Between looks the thread sleeps from 1 us, doubling to 50 us: short
 * waits end within microseconds, long ones leave the cores to the device's threads. */
static void wait_for(clrun_cli_dist *d, MPI_Request *req, int rc, const char *what)
{
    if (rc != MPI_SUCCESS)
        failed(d, rc, what);
    double start = MPI_Wtime();
    long pause_ns = 1000;
    while (!poll_request(d, req, &start, what)) {
        struct timespec ts = {0, pause_ns};
        nanosleep(&ts, NULL);
        pause_ns = pause_ns < 32000 ? pause_ns * 2 : 50000;
    }
}

/* buf (count of type) summed over the ranks in place, or the job ended with the reason. */
static void sum(clrun_cli_dist *d, void *buf, int count, MPI_Datatype type, const char *what)
{
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, count, type, MPI_SUM, comm, &req);
    wait_for(d, &req, rc, what);
}

/* Whether one collective takes `count` floats (its count is an int), and those gradients
 * times this rank's weight: what the ranks' sum makes the mean loss's gradient (bucket: for the
 * message, -1 for all of them). */
static clrun_status weigh(const clrun_cli_dist *d, float *gradients, uint64_t count, int32_t bucket,
                          char *err, size_t errlen)
{
    if (count > (uint64_t)INT32_MAX) {
        char where[32] = "";
        if (bucket >= 0)
            snprintf(where, sizeof where, " in bucket %d", (int)bucket);
        snprintf(err, errlen, "%llu gradient values%s: more than one all-reduce takes",
                 (unsigned long long)count, where);
        return CLRUN_ERROR_INVALID_ARGUMENT;
    }
    for (uint64_t i = 0; i < count; i++)
        gradients[i] = (float)((double)gradients[i] * d->weight);
    return CLRUN_OK;
}

clrun_status clrun_cli_dist_reduce(void *user, uint64_t step, float *gradients, uint64_t count,
                                   char *err, size_t errlen)
{
    clrun_cli_dist *d = user;
    if (d->size <= 1)
        return CLRUN_OK;
    double start = MPI_Wtime();
    clrun_status s = weigh(d, gradients, count, -1, err, errlen);
    if (s != CLRUN_OK)
        return s;
    char what[96];
    snprintf(what, sizeof what, "the gradient all-reduce of step %llu", (unsigned long long)step);
    sum(d, gradients, (int)count, MPI_FLOAT, what);
    d->last_reduce_s = MPI_Wtime() - start;
    d->reduce_s += d->last_reduce_s;
    d->reduces++;
    return CLRUN_OK;
}

/* The bucketed reduction's collectives in flight: per bucket, its request and since when it
 * is waited for. */
static MPI_Request *bucket_req;
static double *bucket_since;
static int bucket_cap;

clrun_status clrun_cli_dist_bucket_start(void *user, uint64_t step, int32_t bucket,
                                         float *gradients, uint64_t count, char *err,
                                         size_t errlen)
{
    clrun_cli_dist *d = user;
    if (bucket >= bucket_cap) {
        int cap = bucket + 16;
        MPI_Request *req = realloc(bucket_req, sizeof *req * (size_t)cap);
        if (req)
            bucket_req = req;
        double *since = req ? realloc(bucket_since, sizeof *since * (size_t)cap) : NULL;
        if (since == NULL) {
            snprintf(err, errlen, "out of host memory for %d buckets", (int)bucket + 1);
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        }
        bucket_since = since;
        bucket_cap = cap;
    }
    if (count > (uint64_t)INT32_MAX) /* refused before anything starts (weigh says so too) */
        return weigh(d, gradients, count, bucket, err, errlen);
    double now = MPI_Wtime();
    if (bucket == 0) {
        d->bucket_start = now;
        d->last_reduce_s = 0;
        d->reduces++;
    }
    bucket_since[bucket] = now;
    bucket_req[bucket] = MPI_REQUEST_NULL;
    if (d->size <= 1)
        return CLRUN_OK;
    (void)weigh(d, gradients, count, bucket, err, errlen); /* as clrun_cli_dist_reduce: the same sums */
    int rc = MPI_Iallreduce(MPI_IN_PLACE, gradients, (int)count, MPI_FLOAT, MPI_SUM, comm,
                            &bucket_req[bucket]);
    if (rc != MPI_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "the gradient all-reduce of step %llu, bucket %d",
                 (unsigned long long)step, (int)bucket);
        failed(d, rc, what);
    }
    return CLRUN_OK;
}

clrun_status clrun_cli_dist_bucket_test(void *user, uint64_t step, int32_t bucket, bool *done,
                                        char *err, size_t errlen)
{
    clrun_cli_dist *d = user;
    (void)err;
    (void)errlen;
    *done = true;
    if (d->size > 1 && bucket_req[bucket] != MPI_REQUEST_NULL) {
        char what[96];
        snprintf(what, sizeof what, "the gradient all-reduce of step %llu, bucket %d",
                 (unsigned long long)step, (int)bucket);
        *done = poll_request(d, &bucket_req[bucket], &bucket_since[bucket], what);
    }
    if (*done) { /* the reduction's span so far: from the first bucket's start */
        double span = MPI_Wtime() - d->bucket_start;
        if (span > d->last_reduce_s) {
            d->reduce_s += span - d->last_reduce_s;
            d->last_reduce_s = span;
        }
    }
    return CLRUN_OK;
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
        clrun_cli_share(chunks, d->size, q, &first, &end);
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
                          counts + d->size, MPI_FLOAT, 0, comm, &req);
    wait_for(d, &req, rc, what);
    float *out;
    if (d->rank == 0) {
        /* the other ranks' blocks after this one's, in chunk order: the same merges */
        const float *at = buf;
        for (int q = 1; q < d->size; q++) {
            int64_t first, end;
            clrun_cli_share(chunks, d->size, q, &first, &end);
            int n = clrun_cli_tree_blocks(first, end, lo, level, most);
            for (int k = 0; k < n; k++, at += p) {
                float *next = clrun_cli_tree_next(tree);
                if (next == NULL)
                    goto oom;
                memcpy(next, at, sizeof *next * p);
                if (!clrun_cli_tree_push(tree, lo[k], level[k]))
                    goto oom;
            }
        }
        out = (float *)clrun_cli_tree_fold(tree);
    } else {
        clrun_cli_tree_reset(tree);
        out = clrun_cli_tree_next(tree);
        if (out == NULL)
            goto oom;
    }
    rc = MPI_Ibcast(out, (int)p, MPI_FLOAT, 0, comm, &req);
    wait_for(d, &req, rc, what);
    result = out;
    d->last_reduce_s = MPI_Wtime() - start;
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
    free(bucket_req);
    free(bucket_since);
    bucket_req = NULL;
    bucket_since = NULL;
    bucket_cap = 0;
    if (!d->started)
        return;
    MPI_Comm_free(&comm);
    MPI_Finalize();
    d->started = false;
}
