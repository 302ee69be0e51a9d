/* libclrun-mpi: data-parallel training over MPI (<clrun/mpi.h>). Every collective is
 * non-blocking and polled against the timeout. While it polls, a rank answers the others'
 * probes; when its collective has not completed within the timeout, it probes every other rank
 * and names those that do not answer within a grace period (dead, hung, or stuck outside any
 * collective), and the call fails; when all answer, it waits on. Probes cost nothing until a
 * timeout. A failure breaks the handle: the caller ends the job (clrun_mpi_abort). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <mpi.h>

#include <clrun/mpi.h>
#include <clrun/train_parallel.h>

#define PROBE_TAG 2801
#define ANSWER_TAG 2802
#define GRACE_S 2.0 /* how long a timed-out rank waits for answers (at most half the timeout) */
#define MESSAGE_MAX 1024

struct clrun_mpi {
    MPI_Comm comm;      /* the caller's, duplicated: no other code's messages */
    int rank, size;
    double timeout_s;   /* how long a collective may wait for the others */
    double weight;      /* this rank's share of the global batch: local rows / global rows */
    bool broken;        /* a collective failed: every call fails with `message` */
    char message[MESSAGE_MAX];
    clrun_mpi_stats stats;
    double bucket_start; /* a bucketed reduction: when this step's first bucket started */
    /* The bucketed reduction's collectives in flight: per bucket, its request and since when
     * it is waited for. */
    MPI_Request *bucket_req;
    double *bucket_since;
    int bucket_cap;
    /* The layout check of the first steps' reductions (check_layout): the steps seen, the step
     * under way and its reductions so far, and the previous step's. */
    int steps_seen;
    uint64_t layout_step;
    int64_t layout_buckets, layout_previous;
};

static _Thread_local char last_error[MESSAGE_MAX];
/* MPI's lifetime: clrun finalises MPI only when it initialised it (a handle's creation did),
 * once no handle at all is left (any handle may use it, whichever initialised it), and never
 * after a handle broke (the job is to end by MPI_Abort: a finalise could wait on a dead rank). */
static bool mpi_ours;   /* a handle's creation initialised MPI */
static int live;        /* handles created and not destroyed */
static bool any_broken; /* a handle broke: no MPI_Finalize */

static clrun_status fail(clrun_status status, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static clrun_status fail(clrun_status status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(last_error, sizeof last_error, format, args);
    va_end(args);
    return status;
}

const char *clrun_mpi_last_error(void)
{
    return last_error;
}

/* MPI's text for an error code. */
static void mpi_text(int rc, char *text, size_t size)
{
    char buf[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS)
        snprintf(buf, sizeof buf, "MPI error %d", rc);
    snprintf(text, size, "%s", buf);
}

/* An MPI thread level's name. */
static const char *level_name(int level)
{
    if (level == MPI_THREAD_SINGLE)
        return "MPI_THREAD_SINGLE";
    if (level == MPI_THREAD_FUNNELED)
        return "MPI_THREAD_FUNNELED";
    if (level == MPI_THREAD_SERIALIZED)
        return "MPI_THREAD_SERIALIZED";
    if (level == MPI_THREAD_MULTIPLE)
        return "MPI_THREAD_MULTIPLE";
    return "an unknown level";
}

static clrun_status create(MPI_Comm comm, bool world, clrun_mpi **out)
{
    *out = NULL;
    int finalized = 0, initialized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
        return fail(CLRUN_ERROR_INVALID_ARGUMENT, "clrun_mpi_create: MPI is finalised already");
    MPI_Initialized(&initialized);
    bool init_here = false;
    if (!initialized) {
        if (!world) /* a communicator of an MPI not yet running cannot be one */
            return fail(CLRUN_ERROR_INVALID_ARGUMENT, "clrun_mpi_create: a communicator was "
                        "given but MPI is not initialised");
        int provided = MPI_THREAD_SINGLE;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
            return fail(CLRUN_ERROR_UNSUPPORTED, "clrun_mpi_create: MPI_Init_thread failed");
        if (provided < MPI_THREAD_SERIALIZED) {
            MPI_Finalize();
            return fail(CLRUN_ERROR_UNSUPPORTED, "clrun_mpi_create: MPI provides %s threads; "
                        "clrun needs MPI_THREAD_SERIALIZED (a handle's calls may come from any "
                        "thread, one at a time)", level_name(provided));
        }
        init_here = true;
        mpi_ours = true;
    } else {
        /* the caller's MPI: below SERIALIZED, only its main thread may call MPI */
        int level = MPI_THREAD_SINGLE, main_thread = 0;
        MPI_Query_thread(&level);
        MPI_Is_thread_main(&main_thread);
        if (level < MPI_THREAD_SERIALIZED && !main_thread)
            return fail(CLRUN_ERROR_UNSUPPORTED, "clrun_mpi_create: MPI was initialised with "
                        "%s threads, under which only its main thread may call MPI, and this "
                        "is another thread; initialise it with MPI_THREAD_SERIALIZED (or "
                        "create and use the handle on the main thread)", level_name(level));
    }
    if (world)
        comm = MPI_COMM_WORLD;
    clrun_status s;
    if (comm == MPI_COMM_NULL) {
        s = fail(CLRUN_ERROR_INVALID_ARGUMENT, "clrun_mpi_create: the communicator is MPI_COMM_NULL "
             "(or a Fortran handle that names no communicator)");
        goto undo;
    }
    /* A handle MPI refuses is reported on MPI_COMM_WORLD's error handler (fatal by default):
     * made to return while the communicator is checked and duplicated. */
    MPI_Errhandler old = MPI_ERRHANDLER_NULL;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &old);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int inter = 0, rc = MPI_Comm_test_inter(comm, &inter);
    MPI_Comm dup = MPI_COMM_NULL;
    if (rc == MPI_SUCCESS && !inter)
        rc = MPI_Comm_dup(comm, &dup);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, old);
    MPI_Errhandler_free(&old);
    if (rc != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        mpi_text(rc, text, sizeof text);
        s = fail(CLRUN_ERROR_INVALID_ARGUMENT, "clrun_mpi_create: MPI refuses the communicator: %s",
             text);
        goto undo;
    }
    if (inter) {
        s = fail(CLRUN_ERROR_INVALID_ARGUMENT, "clrun_mpi_create: the communicator is an "
             "intercommunicator; data parallelism needs an intracommunicator");
        goto undo;
    }
    clrun_mpi *mpi = calloc(1, sizeof *mpi);
    if (mpi == NULL) {
        MPI_Comm_free(&dup);
        s = fail(CLRUN_ERROR_OUT_OF_HOST_MEMORY, "clrun_mpi_create: out of host memory");
        goto undo;
    }
    mpi->comm = dup;
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    MPI_Comm_rank(dup, &mpi->rank);
    MPI_Comm_size(dup, &mpi->size);
    mpi->timeout_s = 60;
    mpi->weight = 1.0;
    live++;
#ifdef PR_SET_TIMERSLACK
    prctl(PR_SET_TIMERSLACK, 1000UL); /* the polls' short sleeps: 1 us late, not Linux's 50 */
#endif
    *out = mpi;
    return CLRUN_OK;
undo:
    if (init_here && live == 0) {
        MPI_Finalize();
        mpi_ours = false;
    }
    return s;
}

clrun_status clrun_mpi_create(const MPI_Comm *comm, clrun_mpi **out)
{
    if (out == NULL)
        return fail(CLRUN_ERROR_INVALID_ARGUMENT, "clrun_mpi_create: out is NULL");
    return create(comm ? *comm : MPI_COMM_NULL, comm == NULL, out);
}

clrun_status clrun_mpi_create_fortran(MPI_Fint comm, clrun_mpi **out)
{
    if (out == NULL)
        return fail(CLRUN_ERROR_INVALID_ARGUMENT, "clrun_mpi_create_fortran: out is NULL");
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized) {
        *out = NULL;
        return fail(CLRUN_ERROR_INVALID_ARGUMENT, "clrun_mpi_create_fortran: MPI is not running "
                    "(a Fortran handle names a communicator of a running MPI only)");
    }
    MPI_Comm c = MPI_Comm_f2c(comm);
#ifdef OPEN_MPI
    if (c == (MPI_Comm)0) /* Open MPI's answer to an index it has no communicator at */
        c = MPI_COMM_NULL;
#endif
    return clrun_mpi_create(&c, out);
}

void clrun_mpi_destroy(clrun_mpi *mpi)
{
    if (mpi == NULL)
        return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && !mpi->broken)
        MPI_Comm_free(&mpi->comm);
    free(mpi->bucket_req);
    free(mpi->bucket_since);
    free(mpi);
    if (--live == 0 && mpi_ours && !finalized && !any_broken) {
        MPI_Finalize();
        mpi_ours = false;
    }
}

int clrun_mpi_rank(const clrun_mpi *mpi)
{
    return mpi ? mpi->rank : -1;
}

int clrun_mpi_size(const clrun_mpi *mpi)
{
    return mpi ? mpi->size : -1;
}

MPI_Comm clrun_mpi_comm(const clrun_mpi *mpi)
{
    return mpi ? mpi->comm : MPI_COMM_NULL;
}

bool clrun_mpi_broken(const clrun_mpi *mpi)
{
    return mpi != NULL && mpi->broken;
}

clrun_status clrun_mpi_share(clrun_mpi *mpi, int64_t global_rows, int64_t *first, int64_t *rows)
{
    if (global_rows < mpi->size)
        return fail(CLRUN_ERROR_INVALID_ARGUMENT, "clrun_mpi_share: a global batch of %lld rows "
                    "is less than a row for each of the %d ranks", (long long)global_rows,
                    mpi->size);
    int64_t at, mine;
    clrun_status st = clrun_train_parallel_share(global_rows, mpi->size, mpi->rank, &at, &mine);
    if (st != CLRUN_OK)
        return fail(st, "clrun_mpi_share: %s", clrun_last_error(NULL));
    if (first)
        *first = at;
    if (rows)
        *rows = mine;
    mpi->weight = (double)mine / (double)global_rows;
    return CLRUN_OK;
}

clrun_status clrun_mpi_set_weight(clrun_mpi *mpi, double weight)
{
    if (mpi == NULL)
        return fail(CLRUN_ERROR_INVALID_ARGUMENT, "clrun_mpi_set_weight: the handle is NULL");
    if (!(weight > 0 && weight <= 1))
        return fail(CLRUN_ERROR_INVALID_ARGUMENT, "clrun_mpi_set_weight: the weight is a rank's "
                    "rows over the global batch's, in (0, 1], not %g", weight);
    mpi->weight = weight;
    return CLRUN_OK;
}

double clrun_mpi_weight(const clrun_mpi *mpi)
{
    return mpi ? mpi->weight : 0;
}

clrun_status clrun_mpi_set_timeout(clrun_mpi *mpi, double seconds)
{
    if (mpi == NULL)
        return fail(CLRUN_ERROR_INVALID_ARGUMENT, "clrun_mpi_set_timeout: the handle is NULL");
    if (!(seconds > 0) || !isfinite(seconds))
        return fail(CLRUN_ERROR_INVALID_ARGUMENT, "clrun_mpi_set_timeout: seconds > 0 (finite), "
                    "not %g", seconds);
    mpi->timeout_s = seconds;
    return CLRUN_OK;
}

double clrun_mpi_timeout(const clrun_mpi *mpi)
{
    return mpi ? mpi->timeout_s : 0;
}

void clrun_mpi_stats_get(const clrun_mpi *mpi, clrun_mpi_stats *stats)
{
    static const clrun_mpi_stats none;
    if (stats)
        *stats = mpi ? mpi->stats : none;
}

/* Answers the probes other ranks sent: I am alive and polling. */
static void answer_probes(clrun_mpi *mpi)
{
    for (;;) {
        int pending = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, PROBE_TAG, mpi->comm, &pending, &st) != MPI_SUCCESS ||
            !pending)
            return;
        static const int alive = 1; /* static: the send outlives this call */
        int probe = 0;
        MPI_Recv(&probe, 1, MPI_INT, st.MPI_SOURCE, PROBE_TAG, mpi->comm, MPI_STATUS_IGNORE);
        MPI_Request r;
        if (MPI_Isend(&alive, 1, MPI_INT, st.MPI_SOURCE, ANSWER_TAG, mpi->comm, &r) ==
            MPI_SUCCESS)
            MPI_Request_free(&r);
    }
}

/* After a timeout: the ranks that do not answer a probe within the grace period, into
 * missing (a list like "1, 3"); their count. */
static int unanswered(clrun_mpi *mpi, char *missing, size_t size)
{
    static const int probe = 1;
    int n = mpi->size, count = 0;
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
        if (q == mpi->rank)
            continue;
        MPI_Irecv(&answers[q], 1, MPI_INT, q, ANSWER_TAG, mpi->comm, &req[2 * q]);
        MPI_Isend(&probe, 1, MPI_INT, q, PROBE_TAG, mpi->comm, &req[2 * q + 1]);
    }
    double start = MPI_Wtime();
    double grace = mpi->timeout_s / 2 < GRACE_S ? mpi->timeout_s / 2 : GRACE_S;
    int done = 0;
    while (!done && MPI_Wtime() - start < grace) {
        answer_probes(mpi);
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
    if (count == 0) {
        /* every rank answered, so every probe was received (an answer follows its probe's
         * receipt): the sends complete at once, and are completed here, not leaked */
        MPI_Waitall(n * 2, req, MPI_STATUSES_IGNORE);
        free(answers);
    }
    /* else the job is to end (clrun_mpi_abort): the requests still open are left to it, and
     * so are the buffers they name (a leak only when the caller goes on regardless) */
    free(req);
    return count;
}

/* Whether the handle can communicate: not broken (the failure's message) and MPI not
 * finalised under it (the caller's MPI_Finalize while the handle lives); else the status. */
static clrun_status usable(const clrun_mpi *mpi, const char *fn)
{
    if (mpi == NULL)
        return fail(CLRUN_ERROR_INVALID_ARGUMENT, "%s: the handle is NULL", fn);
    if (mpi->broken)
        return fail(CLRUN_ERROR_IO, "%s", mpi->message);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
        return fail(CLRUN_ERROR_INVALID_ARGUMENT, "%s: MPI is finalised: the handle can no "
                    "longer communicate (destroy it; MPI_Finalize comes after every handle's "
                    "destruction)", fn);
    return CLRUN_OK;
}

/* The handle broken with the reason (also this thread's last error); the status to return. */
static clrun_status broken(clrun_mpi *mpi, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static clrun_status broken(clrun_mpi *mpi, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(mpi->message, sizeof mpi->message, format, args);
    va_end(args);
    mpi->broken = true;
    any_broken = true;
    return fail(CLRUN_ERROR_IO, "%s", mpi->message);
}

/* A collective that failed (rc). */
static clrun_status failed(clrun_mpi *mpi, int rc, const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    mpi_text(rc, text, sizeof text);
    return broken(mpi, "rank %d: %s failed: %s", mpi->rank, what, text);
}

/* One look at req, a collective waited for since *start: into *done, whether it is complete.
 * Meanwhile the other ranks' probes are answered; when the timeout has passed, the others are
 * probed: when one does not answer the handle breaks with the reason, when all do they are
 * alive (a slow one polls once it arrives) and the wait starts over. */
static clrun_status poll_request(clrun_mpi *mpi, MPI_Request *req, double *start,
                                 const char *what, bool *done)
{
    int complete = 0;
    int rc = MPI_Test(req, &complete, MPI_STATUS_IGNORE);
    *done = complete != 0;
    if (rc != MPI_SUCCESS) {
        *done = true;
        return failed(mpi, rc, what);
    }
    if (*done)
        return CLRUN_OK;
    answer_probes(mpi);
    if (MPI_Wtime() - *start > mpi->timeout_s) {
        char missing[512];
        if (unanswered(mpi, missing, sizeof missing) == 0) {
            *start = MPI_Wtime();
            return CLRUN_OK;
        }
        *done = true; /* given up: left in flight for MPI_Abort */
        return broken(mpi, "rank %d: %s did not complete within %g s (the timeout): rank%s %s "
                      "did not answer (dead or hung)", mpi->rank, what, mpi->timeout_s,
                      strchr(missing, ',') ? "s" : "", missing);
    }
    return CLRUN_OK;
}

clrun_status clrun_mpi_wait(clrun_mpi *mpi, MPI_Request *req, int rc, const char *what)
{
    clrun_status s = usable(mpi, "clrun_mpi_wait");
    if (s != CLRUN_OK)
        return s;
    if (rc != MPI_SUCCESS)
        return failed(mpi, rc, what);
    double start = MPI_Wtime();
    long pause_ns = 1000;
    /* between looks the thread sleeps from 1 us, doubling to 50 us: short waits end within
     * microseconds, long ones leave the cores to the device's threads */
    for (;;) {
        bool done = false;
        s = poll_request(mpi, req, &start, what, &done);
        if (s != CLRUN_OK || done)
            return s;
        struct timespec ts = {0, pause_ns};
        nanosleep(&ts, NULL);
        pause_ns = pause_ns < 32000 ? pause_ns * 2 : 50000;
    }
}

clrun_status clrun_mpi_sum(clrun_mpi *mpi, double *values, int count, const char *what)
{
    clrun_status s = usable(mpi, "clrun_mpi_sum");
    if (s != CLRUN_OK)
        return s;
    if (count < 0)
        return fail(CLRUN_ERROR_INVALID_ARGUMENT, "clrun_mpi_sum: count %d < 0", count);
    if (mpi->size <= 1)
        return CLRUN_OK;
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_SUM, mpi->comm, &req);
    return clrun_mpi_wait(mpi, &req, rc, what ? what : "a sum over the ranks");
}

/* A hook's failure: the message into err, the status returned. */
static clrun_status hook_error(clrun_status s, char *err, size_t errlen)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", last_error);
    return s;
}

/* Whether one collective takes `count` floats (its count is an int; bucket: for the message,
 * -1 for all of them). */
static clrun_status one_collective(uint64_t count, int32_t bucket)
{
    if (count <= (uint64_t)INT32_MAX)
        return CLRUN_OK;
    char where[32] = "";
    if (bucket >= 0)
        snprintf(where, sizeof where, " in bucket %d", (int)bucket);
    return fail(CLRUN_ERROR_INVALID_ARGUMENT, "%llu gradient values%s: more than one all-reduce "
                "takes", (unsigned long long)count, where);
}

/* The gradients times this rank's weight: what the ranks' sum makes the mean loss's gradient. */
static void weigh(const clrun_mpi *mpi, float *gradients, uint64_t count)
{
    for (uint64_t i = 0; i < count; i++)
        gradients[i] = (float)((double)gradients[i] * mpi->weight);
}

/* Steps whose reductions are checked against the other ranks' (see check_layout). */
#define LAYOUT_STEPS 2

/* Before a reduction of the first LAYOUT_STEPS steps the handle sees (bucket: -1 for one
 * reduction of all the gradients): whether every rank reduces the same thing, which the
 * collectives need and nothing else checks (ranks whose models, buckets or schedules differ
 * would all-reduce different counts: an error of MPI's at best, wrong sums at worst). A small
 * all-reduce of the bucket's index, its floats and the previous step's reductions, every rank's
 * the same unless they differ; a rank with a reduction more than another meets the other's next
 * step's check, whose index differs. Every rank gets the same answer, so all fail together. */
static clrun_status check_layout(clrun_mpi *mpi, uint64_t step, int32_t bucket, uint64_t count)
{
    if (mpi->steps_seen == 0 || step != mpi->layout_step) {
        mpi->steps_seen++;
        mpi->layout_step = step;
        mpi->layout_previous = mpi->layout_buckets;
        mpi->layout_buckets = 0;
    }
    mpi->layout_buckets++;
    if (mpi->size <= 1 || mpi->steps_seen > LAYOUT_STEPS)
        return CLRUN_OK;
    long long mine[3] = {bucket, (long long)count, mpi->layout_previous};
    long long v[6] = {mine[0], mine[1], mine[2], -mine[0], -mine[1], -mine[2]};
    char what[96];
    snprintf(what, sizeof what, "the check of step %llu's reductions", (unsigned long long)step);
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, v, 6, MPI_LONG_LONG, MPI_MAX, mpi->comm, &req);
    clrun_status s = clrun_mpi_wait(mpi, &req, rc, what);
    if (s != CLRUN_OK)
        return s;
    static const char *const names[3] = {"reduction", "gradient values", "reductions before"};
    for (int k = 0; k < 3; k++)
        if (v[k] != -v[k + 3])
            return fail(CLRUN_ERROR_INVALID_ARGUMENT, "rank %d: the ranks reduce different "
                        "gradients at step %llu (%s: %lld here, from %lld to %lld over the ranks): "
                        "every rank needs the same model, --bucket and schedule", mpi->rank,
                        (unsigned long long)step, names[k], mine[k], -v[k + 3], v[k]);
    return CLRUN_OK;
}

/* A bucket's collective, for messages. */
static void bucket_what(char *what, size_t size, uint64_t step, int32_t bucket)
{
    snprintf(what, size, "the gradient all-reduce of step %llu, bucket %d", (unsigned long long)step,
             (int)bucket);
}

clrun_status clrun_mpi_reduce(void *user, uint64_t step, float *gradients, uint64_t count,
                              char *err, size_t errlen)
{
    clrun_mpi *mpi = user;
    clrun_status s = usable(mpi, "the gradient all-reduce");
    if (s != CLRUN_OK)
        return hook_error(s, err, errlen);
    if (mpi->size <= 1)
        return CLRUN_OK;
    double start = MPI_Wtime();
    if ((s = one_collective(count, -1)) != CLRUN_OK ||
        (s = check_layout(mpi, step, -1, count)) != CLRUN_OK)
        return hook_error(s, err, errlen);
    weigh(mpi, gradients, count);
    char what[96];
    snprintf(what, sizeof what, "the gradient all-reduce of step %llu", (unsigned long long)step);
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, gradients, (int)count, MPI_FLOAT, MPI_SUM, mpi->comm,
                            &req);
    if ((s = clrun_mpi_wait(mpi, &req, rc, what)) != CLRUN_OK)
        return hook_error(s, err, errlen);
    mpi->stats.last_reduce_s = MPI_Wtime() - start;
    mpi->stats.reduce_s += mpi->stats.last_reduce_s;
    mpi->stats.reduces++;
    return CLRUN_OK;
}

clrun_status clrun_mpi_bucket_start(void *user, uint64_t step, int32_t bucket, float *gradients,
                                    uint64_t count, char *err, size_t errlen)
{
    clrun_mpi *mpi = user;
    clrun_status s = usable(mpi, "the gradient all-reduce");
    if (s != CLRUN_OK)
        return hook_error(s, err, errlen);
    if (bucket < 0)
        return hook_error(fail(CLRUN_ERROR_INVALID_ARGUMENT, "bucket %d < 0", (int)bucket), err,
                          errlen);
    if (bucket >= mpi->bucket_cap) {
        int cap = bucket + 16;
        MPI_Request *req = realloc(mpi->bucket_req, sizeof *req * (size_t)cap);
        if (req)
            mpi->bucket_req = req;
        double *since = req ? realloc(mpi->bucket_since, sizeof *since * (size_t)cap) : NULL;
        if (since == NULL)
            return hook_error(fail(CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for %d "
                                   "buckets", (int)bucket + 1), err, errlen);
        mpi->bucket_since = since;
        mpi->bucket_cap = cap;
    }
    if ((s = one_collective(count, bucket)) != CLRUN_OK || /* refused before anything starts */
        (s = check_layout(mpi, step, bucket, count)) != CLRUN_OK)
        return hook_error(s, err, errlen);
    double now = MPI_Wtime();
    if (bucket == 0) {
        mpi->bucket_start = now;
        mpi->stats.last_reduce_s = 0;
        mpi->stats.reduces++;
    }
    mpi->bucket_since[bucket] = now;
    mpi->bucket_req[bucket] = MPI_REQUEST_NULL;
    if (mpi->size <= 1)
        return CLRUN_OK;
    weigh(mpi, gradients, count); /* as clrun_mpi_reduce: the same sums */
    int rc = MPI_Iallreduce(MPI_IN_PLACE, gradients, (int)count, MPI_FLOAT, MPI_SUM, mpi->comm,
                            &mpi->bucket_req[bucket]);
    if (rc != MPI_SUCCESS) {
        char what[96];
        bucket_what(what, sizeof what, step, bucket);
        mpi->bucket_req[bucket] = MPI_REQUEST_NULL;
        s = failed(mpi, rc, what);
        return hook_error(s, err, errlen);
    }
    return CLRUN_OK;
}

clrun_status clrun_mpi_bucket_test(void *user, uint64_t step, int32_t bucket, bool *done,
                                   char *err, size_t errlen)
{
    clrun_mpi *mpi = user;
    *done = true;
    if (mpi == NULL)
        return hook_error(usable(mpi, "the gradient all-reduce"), err, errlen);
    if (bucket < 0 || bucket >= mpi->bucket_cap)
        return hook_error(fail(CLRUN_ERROR_INVALID_ARGUMENT, "bucket %d was not started",
                               (int)bucket), err, errlen);
    /* broken: given up, what is in flight is left to MPI_Abort (see mpi.h) */
    clrun_status s = usable(mpi, "the gradient all-reduce");
    if (s != CLRUN_OK)
        return hook_error(s, err, errlen);
    if (mpi->size > 1 && mpi->bucket_req[bucket] != MPI_REQUEST_NULL) {
        char what[96];
        bucket_what(what, sizeof what, step, bucket);
        s = poll_request(mpi, &mpi->bucket_req[bucket], &mpi->bucket_since[bucket], what,
                         done);
        if (s != CLRUN_OK)
            return hook_error(s, err, errlen);
    }
    if (*done) { /* the reduction's span so far: from the first bucket's start */
        double span = MPI_Wtime() - mpi->bucket_start;
        if (span > mpi->stats.last_reduce_s) {
            mpi->stats.reduce_s += span - mpi->stats.last_reduce_s;
            mpi->stats.last_reduce_s = span;
        }
    }
    return CLRUN_OK;
}

clrun_status clrun_mpi_train_options(clrun_mpi *mpi, clrun_train_options *options,
                                     uint64_t bucket_bytes)
{
    if (mpi == NULL || options == NULL)
        return fail(CLRUN_ERROR_INVALID_ARGUMENT, "clrun_mpi_train_options: %s is NULL",
                    mpi ? "options" : "the handle");
    options->reduce_user = mpi;
    if (bucket_bytes > 0) {
        options->bucket_bytes = bucket_bytes;
        options->reduce = NULL;
        options->bucket_start = clrun_mpi_bucket_start;
        options->bucket_test = clrun_mpi_bucket_test;
    } else {
        options->reduce = clrun_mpi_reduce;
        options->bucket_start = NULL;
        options->bucket_test = NULL;
    }
    return CLRUN_OK;
}

void clrun_mpi_abort(clrun_mpi *mpi, int code)
{
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized)
        return;
    MPI_Abort(mpi ? mpi->comm : MPI_COMM_WORLD, code ? code : 1);
}
