/* libclrun-mpi (<clrun/mpi.h>) under mpirun -np N (tests/mpi_train.sh runs it on 1, 2 and 3
 * ranks): an MLP trained data-parallel through the C API, every rank on its share of each
 * global batch (the hooks of clrun_mpi_train_options, bucketed and not, over MPI_COMM_WORLD,
 * a communicator handed in and its Fortran handle), ends with the parameters of one process
 * at the same global batch (trained by every rank alone, without hooks) within 1e-6 of each
 * tensor's largest value after 108 steps, the same bits on every rank. Bad input (MPI_COMM_NULL, a Fortran
 * handle of no communicator, a global batch smaller than the ranks, a timeout or weight out of
 * range) fails with a clear message. The library initialises MPI here (clrun_mpi_create before
 * MPI_Init) and finalises it with its last handle: a second world handle, destroyed last,
 * still sums correctly after the first (which initialised MPI) is gone. Exit 0, or 1 with
 * FAIL lines. MPI's thread level, clrun's request, is MPI_THREAD_SERIALIZED at least. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include <clrun/clrun.h>
#include <clrun/mpi.h>

#define IN 16
#define HIDDEN 24
#define CLASSES 5
#define GLOBAL 32 /* rows of a global batch: 11, 11 and 10 on 3 ranks */
#define ROWS 96   /* the data: 3 global batches */
#define PARAMS 4

static int failures, rank;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL: rank %d: line %d: ", rank, __LINE__);                           \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static float x[ROWS * IN];
static int64_t labels[ROWS];

/* The same data on every rank: a fixed linear congruential stream. */
static void make_data(void)
{
    uint32_t s = 12345;
    for (int i = 0; i < ROWS * IN; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / (float)(1u << 24) - 0.5f;
    }
    for (int r = 0; r < ROWS; r++) {
        s = s * 1664525u + 1013904223u;
        labels[r] = (int64_t)((s >> 8) % CLASSES);
    }
}

/* The MLP with a batch of `rows`; its weights drawn from fixed seeds, the same for any batch. */
static clrun_graph *mlp(int64_t rows)
{
    char text[2048];
    snprintf(text, sizeof text,
             "graph mpi_mlp\n"
             "input x: f32[%lld, %d]\n"
             "const w1: f32[%d, %d] uniform(-0.25, 0.25) seed=1\n"
             "const b1: f32[%d] uniform(-0.25, 0.25) seed=2\n"
             "const w2: f32[%d, %d] uniform(-0.2, 0.2) seed=3\n"
             "const b2: f32[%d] uniform(-0.2, 0.2) seed=4\n"
             "node h: f32[%lld, %d] = matmul(x, w1, b1)\n"
             "node a: f32[%lld, %d] = relu(h)\n"
             "node logits: f32[%lld, %d] = matmul(a, w2, b2)\n"
             "output logits\n",
             (long long)rows, IN, IN, HIDDEN, HIDDEN, HIDDEN, CLASSES, CLASSES, (long long)rows,
             HIDDEN, (long long)rows, HIDDEN, (long long)rows, CLASSES);
    clrun_graph *g = NULL;
    char err[512];
    if (clrun_graph_parse(text, strlen(text), "mpi_mlp", &g, err, sizeof err) != CLRUN_OK)
        CHECK(0, "the MLP does not parse: %s", err);
    return g;
}

/* Trains the MLP on rows [first, first + rows) of every global batch for `steps` steps
 * (cycling over the data), with dp's hooks when dp is given; its parameters into params
 * (concatenated). 0, or -1 after a FAIL. */
static int train(clrun_context *ctx, clrun_mpi *dp, bool bucketed, clrun_optimizer_kind kind,
                 int64_t first, int64_t rows, int steps, float *params, uint64_t *count)
{
    clrun_graph *g = mlp(rows);
    if (g == NULL)
        return -1;
    clrun_train_options opt;
    clrun_train_options_init(&opt);
    opt.graph.loss = CLRUN_LOSS_XENT;
    opt.graph.loss_tensor = "logits";
    clrun_optimizer_init(&opt.graph.optimizer, kind);
    opt.graph.optimizer.lr = kind == CLRUN_OPTIMIZER_SGD ? 0.1 : 0.01;
    opt.graph.optimizer.momentum = kind == CLRUN_OPTIMIZER_SGD ? 0.9 : 0;
    if (dp) {
        /* several buckets of the 2.2 KiB of gradients, or one all-reduce */
        clrun_status s = clrun_mpi_train_options(dp, &opt, bucketed ? 512 : 0);
        CHECK(s == CLRUN_OK, "clrun_mpi_train_options: %s", clrun_mpi_last_error());
    }
    clrun_train *t = NULL;
    clrun_status s = clrun_train_create(ctx, g, &opt, &t);
    clrun_graph_destroy(g);
    if (s != CLRUN_OK) {
        CHECK(0, "clrun_train_create: %s", clrun_last_error(ctx));
        return -1;
    }
    int rc = 0;
    for (int k = 0; k < steps && rc == 0; k++) {
        int64_t base = (int64_t)(k % (ROWS / GLOBAL)) * GLOBAL + first;
        const void *feeds[2] = {x + base * IN, labels + base};
        s = clrun_train_step(t, feeds, 2, NULL);
        if (s != CLRUN_OK) {
            CHECK(0, "step %d: %s", k + 1, clrun_last_error(ctx));
            rc = -1;
        }
    }
    uint64_t at = 0;
    for (int32_t i = 0; i < clrun_train_param_count(t) && rc == 0; i++) {
        clrun_tensor_type type;
        const char *name;
        clrun_train_param_info(t, i, &name, &type);
        uint64_t n = 1;
        for (int d = 0; d < type.rank; d++)
            n *= (uint64_t)type.shape[d];
        if (clrun_train_read_param(t, i, params + at, n * sizeof *params) != CLRUN_OK) {
            CHECK(0, "reading %s: %s", name, clrun_last_error(ctx));
            rc = -1;
        }
        at += n;
    }
    *count = at;
    clrun_train_destroy(t);
    return rc;
}

#define PARAM_FLOATS (IN * HIDDEN + HIDDEN + HIDDEN * CLASSES + CLASSES)

/* The largest difference of a tensor's values over its largest magnitude, over the tensors. */
static double worst(const float *a, const float *b)
{
    static const int sizes[PARAMS] = {IN * HIDDEN, HIDDEN, HIDDEN * CLASSES, CLASSES};
    double w = 0;
    for (int k = 0, at = 0; k < PARAMS; at += sizes[k], k++) {
        double diff = 0, top = 0;
        for (int i = at; i < at + sizes[k]; i++) {
            diff = fmax(diff, fabs((double)a[i] - (double)b[i]));
            top = fmax(top, fabs((double)b[i]));
        }
        w = fmax(w, diff / top);
    }
    return w;
}

/* Whether every rank holds the same bits as rank 0. */
static bool same_everywhere(const float *params, uint64_t count)
{
    float *root = malloc(sizeof *root * count);
    memcpy(root, params, sizeof *root * count);
    MPI_Bcast(root, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD);
    int same = memcmp(root, params, sizeof *root * count) == 0, all = 0;
    MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    free(root);
    return all != 0;
}

static void bad_input(clrun_mpi *dp, int size)
{
    clrun_mpi *other = (clrun_mpi *)1;
    MPI_Comm null = MPI_COMM_NULL;
    clrun_status s = clrun_mpi_create(&null, &other);
    CHECK(s == CLRUN_ERROR_INVALID_ARGUMENT && other == NULL &&
              strstr(clrun_mpi_last_error(), "MPI_COMM_NULL"),
          "MPI_COMM_NULL: status %d, '%s'", (int)s, clrun_mpi_last_error());
    other = (clrun_mpi *)1;
    s = clrun_mpi_create_fortran(1 << 20, &other);
    CHECK(s == CLRUN_ERROR_INVALID_ARGUMENT && other == NULL &&
              strstr(clrun_mpi_last_error(), "names no communicator"),
          "a Fortran handle of no communicator: status %d, '%s'", (int)s, clrun_mpi_last_error());
    int64_t first = -1, rows = -1;
    double weight = clrun_mpi_weight(dp);
    s = clrun_mpi_share(dp, size - 1, &first, &rows);
    char want[128];
    snprintf(want, sizeof want, "a global batch of %d rows is less than a row for each of the %d "
             "ranks", size - 1, size);
    CHECK(s == CLRUN_ERROR_INVALID_ARGUMENT && strstr(clrun_mpi_last_error(), want) &&
              first == -1 && rows == -1 && clrun_mpi_weight(dp) == weight,
          "a global batch of %d on %d ranks: status %d, '%s'", size - 1, size, (int)s,
          clrun_mpi_last_error());
    s = clrun_mpi_set_timeout(dp, 0);
    CHECK(s == CLRUN_ERROR_INVALID_ARGUMENT && strstr(clrun_mpi_last_error(), "seconds > 0"),
          "timeout 0: status %d, '%s'", (int)s, clrun_mpi_last_error());
    s = clrun_mpi_set_weight(dp, 1.5);
    CHECK(s == CLRUN_ERROR_INVALID_ARGUMENT && strstr(clrun_mpi_last_error(), "(0, 1]"),
          "weight 1.5: status %d, '%s'", (int)s, clrun_mpi_last_error());
    CHECK(clrun_mpi_train_options(dp, NULL, 0) == CLRUN_ERROR_INVALID_ARGUMENT,
          "NULL options accepted");
    /* a NULL handle: -1, 0 and zeros from the getters, a clear error from the rest */
    clrun_mpi_stats st = {1, 1, 1};
    clrun_mpi_stats_get(NULL, &st);
    CHECK(clrun_mpi_rank(NULL) == -1 && clrun_mpi_size(NULL) == -1 &&
              clrun_mpi_weight(NULL) == 0 && clrun_mpi_timeout(NULL) == 0 &&
              clrun_mpi_comm(NULL) == MPI_COMM_NULL && st.reduces == 0 && st.reduce_s == 0 &&
              st.last_reduce_s == 0,
          "a NULL handle's rank %d, size %d, weight %g, timeout %g, %llu reductions",
          clrun_mpi_rank(NULL), clrun_mpi_size(NULL), clrun_mpi_weight(NULL),
          clrun_mpi_timeout(NULL), (unsigned long long)st.reduces);
    double v = 1;
    s = clrun_mpi_sum(NULL, &v, 1, NULL);
    CHECK(s == CLRUN_ERROR_INVALID_ARGUMENT && strstr(clrun_mpi_last_error(), "handle is NULL"),
          "clrun_mpi_sum(NULL): status %d, '%s'", (int)s, clrun_mpi_last_error());
    CHECK(clrun_mpi_set_timeout(NULL, 1) == CLRUN_ERROR_INVALID_ARGUMENT &&
              clrun_mpi_set_weight(NULL, 1) == CLRUN_ERROR_INVALID_ARGUMENT,
          "a NULL handle's timeout or weight set");
    CHECK(!clrun_mpi_broken(NULL) && !clrun_mpi_broken(dp), "a handle broken by bad input");
}

/* Ranks whose buckets differ (rank 0 in buckets of 512 bytes, the others in one bucket): the
 * first step fails on every rank, naming the difference, before any all-reduce of mismatched
 * counts; the handle stays usable (every rank took part in the same collectives). */
static void mismatched_buckets(clrun_context *ctx, int size)
{
    if (size < 2)
        return;
    clrun_mpi *dp = NULL;
    clrun_status s = clrun_mpi_create(NULL, &dp);
    CHECK(s == CLRUN_OK, "clrun_mpi_create for the mismatch: %s", clrun_mpi_last_error());
    if (dp == NULL)
        return;
    int64_t first = 0, rows = 0;
    clrun_graph *g = NULL;
    clrun_train *t = NULL;
    clrun_train_options opt;
    clrun_train_options_init(&opt);
    opt.graph.loss = CLRUN_LOSS_XENT;
    opt.graph.loss_tensor = "logits";
    clrun_optimizer_init(&opt.graph.optimizer, CLRUN_OPTIMIZER_SGD);
    if (clrun_mpi_set_timeout(dp, 20) != CLRUN_OK ||
        clrun_mpi_share(dp, GLOBAL, &first, &rows) != CLRUN_OK || (g = mlp(rows)) == NULL ||
        clrun_mpi_train_options(dp, &opt, rank == 0 ? 512 : 1 << 20) != CLRUN_OK ||
        clrun_train_create(ctx, g, &opt, &t) != CLRUN_OK) {
        CHECK(0, "the mismatch's trainer: %s / %s", clrun_mpi_last_error(), clrun_last_error(ctx));
    } else {
        const void *feeds[2] = {x + first * IN, labels + first};
        s = clrun_train_step(t, feeds, 2, NULL);
        CHECK(s == CLRUN_ERROR_INVALID_ARGUMENT &&
                  strstr(clrun_last_error(ctx), "reduce different gradients") != NULL,
              "buckets that differ over the ranks: %s (%s)", clrun_strerror(s),
              clrun_last_error(ctx));
        if (rank == 0)
            printf("buckets that differ over %d ranks: %s\n", size, clrun_last_error(ctx));
        CHECK(!clrun_mpi_broken(dp), "the mismatch broke the handle");
        double one_each = 1;
        s = clrun_mpi_sum(dp, &one_each, 1, "a sum after the refused step");
        CHECK(s == CLRUN_OK && one_each == size, "a sum after the refused step: %g (%s)",
              one_each, clrun_mpi_last_error());
    }
    clrun_train_destroy(t);
    clrun_graph_destroy(g);
    clrun_mpi_destroy(dp);
}

int main(void)
{
    make_data();
    /* MPI is not running yet: the world handle initialises it (and will finalise it) */
    int initialized = 1;
    MPI_Initialized(&initialized);
    CHECK(!initialized, "MPI initialised before the test");
    clrun_mpi *world = NULL;
    clrun_status s = clrun_mpi_create(NULL, &world);
    if (s != CLRUN_OK) {
        fprintf(stderr, "FAIL: clrun_mpi_create(NULL): %s\n", clrun_mpi_last_error());
        return 1;
    }
    MPI_Initialized(&initialized);
    CHECK(initialized, "clrun_mpi_create(NULL) left MPI uninitialised");
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    CHECK(level >= MPI_THREAD_SERIALIZED, "clrun initialised MPI at thread level %d, below "
          "MPI_THREAD_SERIALIZED (%d)", level, MPI_THREAD_SERIALIZED);
    int size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(clrun_mpi_rank(world) == rank && clrun_mpi_size(world) == size,
          "rank %d of %d, MPI says %d of %d", clrun_mpi_rank(world), clrun_mpi_size(world), rank,
          size);
    CHECK(clrun_mpi_comm(world) != MPI_COMM_WORLD, "the handle uses MPI_COMM_WORLD itself");
    CHECK(clrun_mpi_set_timeout(world, 20) == CLRUN_OK && clrun_mpi_timeout(world) == 20,
          "timeout 20 refused");
    /* a second handle over the world, after MPI runs: it outlives the first (which initialised
     * MPI), and MPI with it */
    clrun_mpi *second = NULL;
    s = clrun_mpi_create(NULL, &second);
    CHECK(s == CLRUN_OK, "a second clrun_mpi_create(NULL): %s", clrun_mpi_last_error());
    bad_input(world, size);

    /* a communicator handed in (a duplicate of the world's, the caller's own) and its Fortran
     * handle: the same group */
    MPI_Comm mine;
    MPI_Comm_dup(MPI_COMM_WORLD, &mine);
    clrun_mpi *given = NULL, *fortran = NULL;
    s = clrun_mpi_create(&mine, &given);
    CHECK(s == CLRUN_OK, "clrun_mpi_create(a communicator): %s", clrun_mpi_last_error());
    s = clrun_mpi_create_fortran(MPI_Comm_c2f(mine), &fortran);
    CHECK(s == CLRUN_OK, "clrun_mpi_create_fortran: %s", clrun_mpi_last_error());

    clrun_context *ctx = NULL;
    if (clrun_context_create(NULL, &ctx) != CLRUN_OK) {
        fprintf(stderr, "FAIL: no context: %s\n", clrun_last_error(NULL));
        return 1;
    }
    static float one[PARAM_FLOATS], dist[PARAM_FLOATS];
    uint64_t count = 0;
    /* the criterion holds after 100 steps (108); 6 when CLRUN_TEST_ROUNDS is set below
     * 3 (quick runs) */
    const char *env = getenv("CLRUN_TEST_ROUNDS");
    int steps = env && *env && atoi(env) < 3 ? 6 : 108;
    struct {
        clrun_mpi *dp;
        bool bucketed;
        clrun_optimizer_kind kind;
        const char *what;
    } cases[] = {
        {world, true, CLRUN_OPTIMIZER_ADAM, "MPI_COMM_WORLD, buckets, Adam"},
        {given, false, CLRUN_OPTIMIZER_SGD, "a communicator, one all-reduce, SGD momentum"},
        {fortran, true, CLRUN_OPTIMIZER_SGD, "a Fortran handle, buckets, SGD momentum"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0] && failures == 0; c++) {
        clrun_mpi *dp = cases[c].dp;
        if (dp == NULL)
            continue;
        int64_t first = 0, rows = 0;
        s = clrun_mpi_share(dp, GLOBAL, &first, &rows);
        int64_t share = GLOBAL / size, extra = GLOBAL % size;
        CHECK(s == CLRUN_OK && rows == share + (rank < extra) &&
                  first == rank * share + (rank < extra ? rank : extra) &&
                  clrun_mpi_weight(dp) == (double)rows / GLOBAL,
              "%s: share rows %lld from %lld, weight %g", cases[c].what, (long long)rows,
              (long long)first, clrun_mpi_weight(dp));
        if (train(ctx, NULL, false, cases[c].kind, 0, GLOBAL, steps, one, &count) != 0 ||
            train(ctx, dp, cases[c].bucketed, cases[c].kind, first, rows, steps, dist, &count) != 0)
            break;
        CHECK(count == PARAM_FLOATS, "%llu parameters", (unsigned long long)count);
        double w = worst(dist, one);
        CHECK(w <= 1e-6, "%s: %d ranks differ from one process by %.3g of a tensor's largest",
              cases[c].what, size, w);
        CHECK(same_everywhere(dist, count), "%s: the ranks' parameters differ", cases[c].what);
        clrun_mpi_stats st;
        clrun_mpi_stats_get(dp, &st);
        CHECK(size == 1 || st.reduces == (uint64_t)steps, "%s: %llu reductions for %d steps",
              cases[c].what, (unsigned long long)st.reduces, steps);
        if (rank == 0)
            printf("%s: %d ranks, %d steps: %.3g of a tensor's largest from one process, "
                   "%.3f ms per reduction\n", cases[c].what, size, steps, w,
                   st.reduces ? 1e3 * st.reduce_s / (double)st.reduces : 0.0);
    }
    int before = failures, failed_before = 0; /* every rank or none (collectives) */
    MPI_Allreduce(&before, &failed_before, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (failed_before == 0)
        mismatched_buckets(ctx, size);
    double sum[2] = {1, (double)rank};
    s = clrun_mpi_sum(world, sum, 2, "a test sum");
    CHECK(s == CLRUN_OK && sum[0] == size && sum[1] == size * (size - 1) / 2.0,
          "clrun_mpi_sum: %g %g (%s)", sum[0], sum[1], clrun_mpi_last_error());
    clrun_context_destroy(ctx);
    clrun_mpi_destroy(fortran);
    clrun_mpi_destroy(given);
    MPI_Comm_free(&mine);
    int any = failures, all = 0;
    MPI_Allreduce(&any, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    clrun_mpi_destroy(world); /* initialised MPI, but `second` lives: no MPI_Finalize */
    int finalized = 0;
    MPI_Finalized(&finalized);
    CHECK(!finalized, "destroying the first handle finalised MPI under the second");
    if (!finalized && second) {
        double one_each = 1;
        s = clrun_mpi_sum(second, &one_each, 1, "a sum on the second handle");
        CHECK(s == CLRUN_OK && one_each == size, "the second handle's sum after the first's "
              "destruction: %g (%s)", one_each, clrun_mpi_last_error());
    }
    clrun_mpi_destroy(second); /* the last handle: MPI_Finalize */
    MPI_Finalized(&finalized);
    CHECK(finalized, "the last handle did not finalise MPI, which clrun initialised");
    if (rank == 0 && all == 0)
        printf("test_mpi: %d rank%s: every check passed\n", size, size > 1 ? "s" : "");
    return failures || all ? 1 : 0;
}
