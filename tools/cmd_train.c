/* clrun train: trains a model (.graph or .onnx) on data from .npy files: a loss on one of its
 * tensors, an optimizer, batches drawn from the data in a seeded order each epoch, a line per
 * epoch, the train state saved and resumed, and a JSON report. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include <clrun/clrun.h>

#include "cli.h"
#include "det_sum.h"
#include "dist.h"
#include "model_io.h"
#include "run.h"
#include "train_devices.h"

#define MAX_DATA 16

typedef struct named_file {
    const char *name; /* the model input, or NULL for "the first one" */
    const char *path;
} named_file;

typedef struct dataset {
    clrun_tensor_type type[MAX_DATA + 1]; /* per feed: the file's type */
    void *data[MAX_DATA + 1];
    int count;                            /* feeds, the labels last */
    int64_t rows;
} dataset;

typedef struct train_args {
    const char *path;
    clrun_cli_io io;
    clrun_loss_kind loss;
    const char *loss_tensor;
    named_file data[MAX_DATA];
    int data_count;
    const char *labels;
    named_file test_data[MAX_DATA];
    int test_count;
    const char *test_labels;
    int64_t batch;
    int epochs;
    uint64_t shuffle_seed;
    bool shuffle;
    clrun_optimizer optimizer;
    bool lr_given, wd_given;
    const char *params_text;
    const char *save_state, *resume, *write_step, *save_onnx;
    const char *allocator;
    const char *remat;
    uint64_t memory_budget;
    const char *trace;      /* --trace: the last step's Perfetto trace */
    FILE *trace_file;       /* opened before the work */
    bool plan;              /* --plan: the step's decisions, no training */
    bool json;
    double mpi_timeout;     /* --mpi-timeout, CLRUN_MPI_TIMEOUT: seconds a collective may wait */
    uint64_t bucket;        /* --bucket: bytes per all-reduce bucket (0: one after backward) */
    int ranks;              /* processes training together (mpirun -np), 1 alone */
    const char *devices_text; /* --devices: data parallel over this process's devices */
    int devices;            /* their count (0 without --devices) */
    int64_t global_batch;   /* rows per step over every rank (batch alone) */
    bool deterministic;     /* --deterministic: chunks of chunk_rows, summed in a fixed order */
    int64_t chunk_rows;     /* --chunk: rows per chunk (the model's batch), 1 by default */
    int64_t chunks;         /* chunks per global batch */
    int64_t first_chunk, end_chunk; /* this rank's chunks of each batch: [first, end) */
} train_args;

static void help(void)
{
    printf("usage: clrun train MODEL --loss KIND:TENSOR --data [NAME=]X.npy [--labels Y.npy]\n"
           "                   [--batch N] [--epochs E] [--optimizer sgd|adam|adamw] [--lr LR]\n"
           "                   [--momentum M] [--nesterov] [--weight-decay W] [--betas B1,B2]\n"
           "                   [--eps EPS] [--params A,B,...] [--test-data X.npy --test-labels Y.npy]\n"
           "                   [--seed S | --no-shuffle] [--save-state FILE] [--resume FILE]\n"
           "                   [--allocator NAME] [--remat POLICY] [--memory-budget SIZE] [--plan] [--trace OUT.json] [--json]\n"
           "                   [--dim NAME=V] [--shape INPUT=AxB] [--mpi-timeout S] [--bucket SIZE]\n"
           "                   [--deterministic [--chunk ROWS]] [--devices A,B,...]\n\n"
           "Trains MODEL (.graph or .onnx) on the rows of the .npy files: every epoch visits the\n"
           "rows in an order drawn from the seed, in batches of N (a last partial batch is left\n"
           "out), and each step updates the parameters in place on the device.\n\n"
           "  --loss xent:LOGITS   softmax cross-entropy of LOGITS [N, ..., C] against integer\n"
           "                       labels (--labels: [rows, ...], i32 or i64); reports accuracy\n"
           "  --loss mse:PRED      mean squared error of PRED against --labels (targets, f32)\n"
           "  --loss scalar:LOSS   the model computes its own loss (one f32 element)\n"
           "  --data X.npy         rows for the model's first input (NAME=X.npy for others)\n"
           "  --batch N            rows per step (default: the model input's first dimension, or\n"
           "                       32 when an ONNX model leaves it open)\n"
           "  --epochs E           passes over the data (default 1)\n"
           "  --optimizer          sgd, adam (default) or adamw, with PyTorch's semantics and\n"
           "                       defaults (lr 0.01 for sgd, 0.001 otherwise)\n"
           "  --params A,B         train only these weights (default: every f32 weight the loss\n"
           "                       depends on)\n"
           "  --test-data, --test-labels  evaluate on these rows after every epoch\n"
           "  --save-state FILE    write the parameters and optimizer state at the end\n"
           "  --resume FILE        start from a saved state (the same model and optimizer)\n"
           "  --write-step FILE    write the train step's graph (.graph text) and go on\n"
           "  --save-onnx OUT.onnx an ONNX MODEL with the trained parameters (and batch norms'\n"
           "                       running statistics) as its initializers, same names\n"
           "  --remat POLICY       recompute activations in the backward pass instead of keeping\n"
           "                       them: dots_saveable, nothing_saveable, names:T1,T2,\n"
           "                       except:T1,T2, sqrt_n, every:K, cuts, cuts:K or none;\n"
           "                       host_offload copies them to host memory and back instead;\n"
           "                       per_tensor (per_tensor:M, the M cheapest) gives each the\n"
           "                       cheaper of the two at the device's rate\n"
           "                       (the same results, bit for bit; a lower peak, more work).\n"
           "                       Without it the step takes dots_saveable or sqrt_n where that\n"
           "                       lowers its peak by 4 MiB and 5%% for at most 35%% more\n"
           "                       arithmetic; none keeps every activation\n"
           "  --memory-budget SIZE the trainer may hold SIZE bytes (K, M, G suffixes): the step\n"
           "                       as it is, else the fewest activations recomputed or moved\n"
           "                       to host memory, cheapest first, that fit (or --remat's\n"
           "                       policy alone), run in planned mode so that what it holds is\n"
           "                       known to the byte. Without it, the pool's limit\n"
           "                       (CLRUN_POOL_LIMIT) is the budget when the step may not fit\n"
           "  --plan               prepare the step and print its decisions without training (no\n"
           "                       --data needed): the remat policy taken, the tensors\n"
           "                       recomputed, their bytes and extra arithmetic, and what the\n"
           "                       trainer holds against --memory-budget or the pool's limit\n"
           "  --trace OUT.json     Chrome/Perfetto trace of the last step: a span per kernel,\n"
           "                       recomputed nodes (--remat, a budget) marked \"recompute\"\n"
           "  --json               print the report as one JSON object on the last line\n"
           "  --mpi-timeout S      under mpirun -np N (data parallel, one device per rank):\n"
           "                       seconds a gradient all-reduce may wait for the other ranks\n"
           "                       before the job is aborted naming the missing ones (default\n"
           "                       CLRUN_MPI_TIMEOUT, else 60). Each rank trains on its share of\n"
           "                       every batch of --batch rows (the global batch; without it,\n"
           "                       the model's batch per rank) and only rank 0 reports and saves\n"
           "  --bucket SIZE        under mpirun: the gradients all-reduced in buckets of SIZE\n"
           "                       bytes at least (K, M suffixes; default 1M), each started as\n"
           "                       soon as the backward pass has completed it, while the rest\n"
           "                       of the pass runs; 0: one all-reduce after the pass. The same\n"
           "                       sums either way\n"
           "  --deterministic      bit-for-bit the same parameters whatever the number of ranks\n"
           "                       or devices (mpirun -np N, --devices, or one process): every\n"
           "                       batch of --batch rows (needed) is cut into chunks of --chunk\n"
           "                       ROWS (default 1; it must divide the batch), each chunk's\n"
           "                       gradient computed by a forward and backward pass of its own\n"
           "                       (the model's batch is the chunk), and the chunks' gradients\n"
           "                       summed in one fixed order (a binary tree over the chunks).\n"
           "                       Costs a run per chunk\n"
           "  --devices A,B,...    data parallel over these devices of this process (numbers as\n"
           "                       clrun info lists them; one may repeat): each device trains on\n"
           "                       its share of every batch of --batch rows (an ONNX model with an\n"
           "                       open batch; without --batch, the model's batch on each), the\n"
           "                       gradients summed in device order (--bucket as under mpirun),\n"
           "                       one update; the parameters stay the same on every device.\n"
           "                       With --deterministic, each device takes its share of the\n"
           "                       chunks, summed in the same tree as under mpirun\n");
    clrun_cli_io_help(false);
}

static bool parse_double(const char *text, double *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !isfinite(v))
        return false;
    *out = v;
    return true;
}

/* Whether a file can be written at path once training is done: its folder exists and may be
 * written, and path is no folder. Checked before training, so that a typo costs no run. */
static bool can_write(const char *what, const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    struct stat st;
    const char *why = NULL;
    char text[4200];
    if (stat(dir, &st) != 0)
        why = strerror(errno);
    else if (!S_ISDIR(st.st_mode))
        why = (snprintf(text, sizeof text, "%s is not a folder", dir), text);
    else if (access(dir, W_OK) != 0)
        why = strerror(errno);
    else if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        why = "it is a folder";
    if (why == NULL)
        return true;
    fprintf(stderr, "clrun train: cannot write %s '%s': %s (checked before training)\n", what,
            path, why);
    return false;
}

static bool parse_count(const char *text, int64_t max, int64_t *out)
{
    char *end;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end || v < 1 || v > max)
        return false;
    *out = v;
    return true;
}

static void named(const char *value, named_file *f)
{
    const char *eq = strchr(value, '='), *slash = strchr(value, '/');
    if (eq && eq != value && (slash == NULL || slash > eq)) {
        static char names[2 * MAX_DATA][256];
        static int used;
        char *copy = names[used++ % (2 * MAX_DATA)];
        snprintf(copy, 256, "%.*s", (int)(eq - value), value);
        f->name = copy;
        f->path = eq + 1;
    } else {
        f->name = NULL;
        f->path = value;
    }
}

static int parse_args(int argc, char **argv, train_args *a)
{
    memset(a, 0, sizeof *a);
    a->epochs = 1;
    a->shuffle = true;
    a->shuffle_seed = 1;
    a->loss = CLRUN_LOSS_XENT;
    a->mpi_timeout = 60;
    a->bucket = (uint64_t)1 << 20;
    const char *env_timeout = getenv("CLRUN_MPI_TIMEOUT");
    if (env_timeout && !clrun_cli_parse_timeout(env_timeout, &a->mpi_timeout))
        return clrun_cli_usage_error("train", "CLRUN_MPI_TIMEOUT takes seconds > 0, not '%s'",
                                     env_timeout);
    clrun_optimizer_init(&a->optimizer, CLRUN_OPTIMIZER_ADAM);
    /* NAN: not given (parse_double takes finite numbers only, so no value given can be it) */
    double momentum = NAN, b1 = NAN, b2 = NAN, eps = NAN, lr = NAN, wd = NAN;
    bool nesterov = false;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        bool v = i + 1 < argc;
        int taken;
        if (strcmp(arg, "--json") == 0) {
            a->json = true;
        } else if (strcmp(arg, "--plan") == 0) {
            a->plan = true;
        } else if (strcmp(arg, "--nesterov") == 0) {
            nesterov = true;
        } else if (strcmp(arg, "--devices") == 0 && v) {
            a->devices_text = argv[++i];
        } else if (strcmp(arg, "--deterministic") == 0) {
            a->deterministic = true;
        } else if (strcmp(arg, "--chunk") == 0 && v) {
            if (!parse_count(argv[++i], INT32_MAX, &a->chunk_rows))
                return clrun_cli_usage_error("train", "--chunk takes a count of rows >= 1, not "
                                             "'%s'", argv[i]);
        } else if (strcmp(arg, "--no-shuffle") == 0) {
            a->shuffle = false;
        } else if (strcmp(arg, "--loss") == 0 && v) {
            const char *spec = argv[++i], *colon = strchr(spec, ':');
            size_t kind = colon ? (size_t)(colon - spec) : strlen(spec);
            if (colon == NULL || colon[1] == '\0')
                return clrun_cli_usage_error("train", "--loss takes KIND:TENSOR (xent:logits, "
                                             "mse:pred, scalar:loss), not '%s'", spec);
            if (kind == 4 && strncmp(spec, "xent", 4) == 0)
                a->loss = CLRUN_LOSS_XENT;
            else if (kind == 3 && strncmp(spec, "mse", 3) == 0)
                a->loss = CLRUN_LOSS_MSE;
            else if (kind == 6 && strncmp(spec, "scalar", 6) == 0)
                a->loss = CLRUN_LOSS_SCALAR;
            else
                return clrun_cli_usage_error("train", "unknown loss '%.*s' (xent, mse, scalar)",
                                             (int)kind, spec);
            a->loss_tensor = colon + 1;
        } else if (strcmp(arg, "--data") == 0 && v) {
            if (a->data_count == MAX_DATA)
                return clrun_cli_usage_error("train", "at most %d --data files", MAX_DATA);
            named(argv[++i], &a->data[a->data_count++]);
        } else if (strcmp(arg, "--test-data") == 0 && v) {
            if (a->test_count == MAX_DATA)
                return clrun_cli_usage_error("train", "at most %d --test-data files", MAX_DATA);
            named(argv[++i], &a->test_data[a->test_count++]);
        } else if (strcmp(arg, "--labels") == 0 && v) {
            a->labels = argv[++i];
        } else if (strcmp(arg, "--test-labels") == 0 && v) {
            a->test_labels = argv[++i];
        } else if (strcmp(arg, "--batch") == 0 && v) {
            if (!parse_count(argv[++i], INT32_MAX, &a->batch))
                return clrun_cli_usage_error("train", "--batch takes a count >= 1, not '%s'", argv[i]);
        } else if (strcmp(arg, "--epochs") == 0 && v) {
            int64_t e;
            if (!parse_count(argv[++i], 1000000, &e))
                return clrun_cli_usage_error("train", "--epochs takes a count from 1 to 1000000, "
                                             "not '%s'", argv[i]);
            a->epochs = (int)e;
        } else if (strcmp(arg, "--seed") == 0 && v) {
            int64_t s;
            if (!parse_count(argv[++i], INT64_MAX, &s))
                return clrun_cli_usage_error("train", "--seed takes an integer >= 1, not '%s'", argv[i]);
            a->shuffle_seed = (uint64_t)s;
        } else if (strcmp(arg, "--optimizer") == 0 && v) {
            const char *o = argv[++i];
            if (strcmp(o, "sgd") == 0)
                clrun_optimizer_init(&a->optimizer, CLRUN_OPTIMIZER_SGD);
            else if (strcmp(o, "adam") == 0)
                clrun_optimizer_init(&a->optimizer, CLRUN_OPTIMIZER_ADAM);
            else if (strcmp(o, "adamw") == 0)
                clrun_optimizer_init(&a->optimizer, CLRUN_OPTIMIZER_ADAMW);
            else
                return clrun_cli_usage_error("train", "unknown optimizer '%s' (sgd, adam, adamw)", o);
        } else if ((strcmp(arg, "--lr") == 0 || strcmp(arg, "--momentum") == 0 ||
                    strcmp(arg, "--weight-decay") == 0 || strcmp(arg, "--eps") == 0) && v) {
            double x;
            if (!parse_double(argv[++i], &x))
                return clrun_cli_usage_error("train", "%s takes a number, not '%s'", arg, argv[i]);
            *(strcmp(arg, "--lr") == 0 ? &lr : strcmp(arg, "--momentum") == 0 ? &momentum
                                        : strcmp(arg, "--eps") == 0 ? &eps : &wd) = x;
        } else if (strcmp(arg, "--mpi-timeout") == 0 && v) {
            if (!clrun_cli_parse_timeout(argv[++i], &a->mpi_timeout))
                return clrun_cli_usage_error("train", "--mpi-timeout takes seconds > 0, not '%s'",
                                             argv[i]);
        } else if (strcmp(arg, "--bucket") == 0 && v) {
            if (strcmp(argv[++i], "0") == 0)
                a->bucket = 0;
            else if (!clrun_parse_size(argv[i], &a->bucket) || a->bucket == 0)
                return clrun_cli_usage_error("train", "--bucket takes a size in bytes (K, M "
                                             "suffixes) or 0, not '%s'", argv[i]);
        } else if (strcmp(arg, "--betas") == 0 && v) {
            const char *text = argv[++i], *comma = strchr(text, ',');
            char first[64] = "";
            if (comma && (size_t)(comma - text) < sizeof first)
                memcpy(first, text, (size_t)(comma - text));
            if (!comma || !parse_double(first, &b1) || !parse_double(comma + 1, &b2))
                return clrun_cli_usage_error("train", "--betas takes B1,B2, not '%s'", argv[i]);
        } else if (strcmp(arg, "--params") == 0 && v) {
            a->params_text = argv[++i];
        } else if (strcmp(arg, "--save-state") == 0 && v) {
            a->save_state = argv[++i];
        } else if (strcmp(arg, "--save-onnx") == 0 && v) {
            a->save_onnx = argv[++i];
        } else if (strcmp(arg, "--trace") == 0 && v) {
            a->trace = argv[++i];
        } else if (strcmp(arg, "--write-step") == 0 && v) {
            a->write_step = argv[++i];
        } else if (strcmp(arg, "--resume") == 0 && v) {
            a->resume = argv[++i];
        } else if (strcmp(arg, "--allocator") == 0 && v) {
            a->allocator = argv[++i];
        } else if (strcmp(arg, "--remat") == 0 && v) {
            a->remat = argv[++i];
        } else if (strcmp(arg, "--memory-budget") == 0 && v) {
            if (!clrun_parse_size(argv[++i], &a->memory_budget) || a->memory_budget == 0)
                return clrun_cli_usage_error("train", "--memory-budget takes a size in bytes "
                                             "(K, M, G suffixes), not '%s'", argv[i]);
        } else if ((taken = clrun_cli_io_option("train", argc, argv, &i, &a->io, false)) != 0) {
            if (taken == 2)
                return 2;
        } else if (arg[0] == '-') {
            return clrun_cli_usage_error("train", "unknown option or missing value: '%s'", arg);
        } else if (a->path == NULL) {
            a->path = arg;
        } else {
            return clrun_cli_usage_error("train", "one model only ('%s' is extra)", arg);
        }
    }
    if (a->path == NULL)
        return clrun_cli_usage_error("train", "no model given");
    if (a->loss_tensor == NULL)
        return clrun_cli_usage_error("train", "no --loss given (xent:LOGITS, mse:PRED or scalar:LOSS)");
    if (a->data_count == 0 && !a->plan)
        return clrun_cli_usage_error("train", "no --data given");
    if (a->loss == CLRUN_LOSS_SCALAR && (a->labels || a->test_labels))
        return clrun_cli_usage_error("train", "the scalar loss takes no %s: the model computes its "
                                     "loss from its inputs (give each with --data NAME=FILE)",
                                     a->labels ? "--labels" : "--test-labels");
    if (a->loss != CLRUN_LOSS_SCALAR && a->labels == NULL && !a->plan)
        return clrun_cli_usage_error("train", "the %s loss needs --labels",
                                     clrun_loss_kind_name(a->loss));
    if ((a->test_count > 0) != (a->test_labels != NULL && a->loss != CLRUN_LOSS_SCALAR) &&
        !(a->test_count > 0 && a->loss == CLRUN_LOSS_SCALAR))
        return clrun_cli_usage_error("train", "--test-data and --test-labels go together");
    if (a->chunk_rows && !a->deterministic)
        return clrun_cli_usage_error("train", "--chunk is for --deterministic");
    if (a->deterministic && a->batch == 0)
        return clrun_cli_usage_error("train", "--deterministic needs --batch: the global batch, "
                                     "cut into chunks of --chunk rows");
    if (a->deterministic && a->chunk_rows == 0)
        a->chunk_rows = 1;
    if (a->deterministic && a->batch % a->chunk_rows != 0)
        return clrun_cli_usage_error("train", "--deterministic: --batch %" PRId64 " is no "
                                     "multiple of --chunk %" PRId64, a->batch, a->chunk_rows);
    if (a->save_onnx && !clrun_cli_is_onnx(a->path))
        return clrun_cli_usage_error("train", "--save-onnx writes an ONNX model back: MODEL must be one");
    if (a->allocator && !clrun_allocator_valid(a->allocator))
        return clrun_cli_usage_error("train", "unknown allocator '%s': valid names are %s",
                                     a->allocator, clrun_allocator_names());
    clrun_optimizer *o = &a->optimizer;
    if (!isnan(lr))
        o->lr = lr;
    if (!isnan(wd))
        o->weight_decay = wd;
    if (!isnan(momentum))
        o->momentum = momentum;
    if (!isnan(eps))
        o->eps = eps;
    if (!isnan(b1))
        o->beta1 = b1, o->beta2 = b2;
    o->nesterov = nesterov;
    if (o->kind != CLRUN_OPTIMIZER_SGD && (!isnan(momentum) || nesterov))
        return clrun_cli_usage_error("train", "--momentum and --nesterov are for --optimizer sgd");
    if (o->kind == CLRUN_OPTIMIZER_SGD && (!isnan(b1) || !isnan(eps)))
        return clrun_cli_usage_error("train", "--betas and --eps are for adam and adamw");
    return 0;
}

/* Reads one file into ds slot k, converting f64 data to f32 and any integer labels to `want`. */
static int read_file(const char *path, clrun_dtype want, dataset *ds, int k)
{
    char err[1024];
    clrun_tensor_type t;
    void *data = NULL;
    clrun_status s = clrun_cli_read_tensor(path, &t, &data, err, sizeof err);
    if (s != CLRUN_OK) {
        fprintf(stderr, "clrun train: %s\n", err);
        return clrun_cli_data_exit(s);
    }
    if (clrun_tensor_empty(&t)) {
        fprintf(stderr, "clrun train: %s is empty: a dataset needs rows of data\n", path);
        free(data);
        return 2;
    }
    uint64_t n = clrun_tensor_elements(&t);
    if (want == CLRUN_F32 && t.dtype == CLRUN_F64) {
        float *f = malloc(sizeof *f * (size_t)n);
        for (uint64_t i = 0; f && i < n; i++)
            f[i] = (float)((double *)data)[i];
        free(data);
        data = f;
        t.dtype = CLRUN_F32;
    } else if ((want == CLRUN_I64 || want == CLRUN_I32) && (t.dtype == CLRUN_I32 || t.dtype == CLRUN_I64) &&
               t.dtype != want) {
        void *c = malloc((size_t)n * clrun_dtype_size(want));
        for (uint64_t i = 0; c && i < n; i++) {
            int64_t v = t.dtype == CLRUN_I32 ? ((int32_t *)data)[i] : ((int64_t *)data)[i];
            if (want == CLRUN_I64)
                ((int64_t *)c)[i] = v;
            else
                ((int32_t *)c)[i] = (int32_t)v;
        }
        free(data);
        data = c;
        t.dtype = want;
    }
    if (data == NULL) {
        fprintf(stderr, "clrun train: out of host memory reading %s\n", path);
        return 1;
    }
    if (t.dtype != want) {
        fprintf(stderr, "clrun train: %s holds %s: %s expected\n", path, clrun_dtype_name(t.dtype),
                clrun_dtype_name(want));
        free(data);
        return 2;
    }
    if (t.rank < 1) {
        fprintf(stderr, "clrun train: %s holds a scalar: rows expected\n", path);
        free(data);
        return 2;
    }
    ds->type[k] = t;
    ds->data[k] = data;
    return 0;
}

static void dataset_free(dataset *ds)
{
    for (int k = 0; k < ds->count; k++)
        free(ds->data[k]);
    memset(ds, 0, sizeof *ds);
}

/* Reads the files for every feed of the trainer and checks them against it: one row of each is
 * one row of the feed's batch. */
static int load_dataset(clrun_train *t, const named_file *files, int file_count,
                        const char *labels, int64_t classes, const char *flag, dataset *ds)
{
    int32_t feeds = clrun_train_feed_count(t);
    int32_t model_inputs = labels ? feeds - 1 : feeds;
    bool used[MAX_DATA] = {false};
    ds->count = feeds;
    for (int32_t k = 0; k < feeds; k++) {
        const char *name;
        clrun_tensor_type ft;
        clrun_train_feed_info(t, k, &name, &ft);
        const char *path = NULL;
        if (k == model_inputs) {
            path = labels;
        } else {
            for (int f = 0; f < file_count; f++)
                if ((files[f].name == NULL && f == k) || (files[f].name && strcmp(files[f].name, name) == 0)) {
                    if (path != NULL) {
                        fprintf(stderr, "clrun train: two %s files for the model's input '%s': %s "
                                "and %s\n", flag, name, path, files[f].path);
                        return 2;
                    }
                    path = files[f].path;
                    used[f] = true;
                }
        }
        if (path == NULL) {
            fprintf(stderr, "clrun train: no data for the model's input '%s' (give --data %s=FILE)\n",
                    name, name);
            return 2;
        }
        int rc = read_file(path, ft.dtype, ds, k);
        if (rc != 0)
            return rc;
        clrun_tensor_type *dt = &ds->type[k];
        bool same = dt->rank == ft.rank;
        for (int d = 1; same && d < ft.rank; d++)
            same = dt->shape[d] == ft.shape[d];
        if (ft.rank == 0 || !same) {
            char a[128], b[128];
            fprintf(stderr, "clrun train: %s is %s: its rows do not fit '%s', which is %s a batch\n",
                    path, clrun_cli_type_text(dt, a, sizeof a), name, clrun_cli_type_text(&ft, b, sizeof b));
            return 2;
        }
        if (k > 0 && dt->shape[0] != ds->rows) {
            fprintf(stderr, "clrun train: %s has %" PRId64 " rows, the data before it %" PRId64 "\n",
                    path, dt->shape[0], ds->rows);
            return 2;
        }
        ds->rows = dt->shape[0];
        if (k == model_inputs && classes > 0) {
            /* Every label in range before the first step: name the file's own row. */
            uint64_t n = clrun_tensor_elements(dt), per_row = n / (uint64_t)ds->rows;
            for (uint64_t e = 0; e < n; e++) {
                int64_t v = dt->dtype == CLRUN_I32 ? ((int32_t *)ds->data[k])[e] : ((int64_t *)ds->data[k])[e];
                if (v < 0 || v >= classes) {
                    fprintf(stderr, "clrun train: %s: label %" PRId64 " in row %" PRIu64 " is outside "
                            "[0, %" PRId64 "): the logits have %" PRId64 " classes\n", path, v,
                            e / per_row, classes, classes);
                    return 2;
                }
            }
        }
    }
    /* A file no input takes would be left out of training without a word. */
    for (int f = 0; f < file_count; f++)
        if (!used[f]) {
            if (files[f].name)
                fprintf(stderr, "clrun train: %s %s=%s: the model has no input '%s'\n", flag,
                        files[f].name, files[f].path, files[f].name);
            else
                fprintf(stderr, "clrun train: %s %s: the model has %d input%s, so no input takes "
                        "file %d given without a name\n", flag, files[f].path, (int)model_inputs,
                        model_inputs == 1 ? "" : "s", f + 1);
            return 2;
        }
    return 0;
}

/* Copies the rows order[first .. first + n) of every feed into batch buffers (n <= batch; the
 * rest repeat the first row). */
static void gather_batch(const dataset *ds, const int64_t *order, int64_t first, int64_t n,
                         int64_t batch, void **out)
{
    for (int k = 0; k < ds->count; k++) {
        size_t row = (size_t)(clrun_tensor_bytes(&ds->type[k]) / (uint64_t)ds->rows);
        for (int64_t r = 0; r < batch; r++) {
            int64_t src = order[first + (r < n ? r : 0)];
            memcpy((char *)out[k] + (size_t)r * row, (const char *)ds->data[k] + (size_t)src * row, row);
        }
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A seeded permutation (splitmix64 and Fisher-Yates): the same on every machine. */
static void permute(int64_t *order, int64_t n, uint64_t seed, int epoch)
{
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + (uint64_t)epoch;
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        z += 0x9E3779B97F4A7C15ull;
        uint64_t x = z;
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
        x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
        x ^= x >> 31;
        int64_t j = (int64_t)(x % (uint64_t)(i + 1));
        int64_t tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
}

typedef struct epoch_figures {
    double loss, accuracy, test_loss, test_accuracy, samples_per_s;
    bool has_accuracy, has_test;
} epoch_figures;

static int evaluate(clrun_train *t, const dataset *ds, int64_t batch, void **bufs, epoch_figures *f)
{
    int64_t *order = malloc(sizeof *order * (size_t)ds->rows);
    if (order == NULL)
        return 1;
    for (int64_t i = 0; i < ds->rows; i++)
        order[i] = i;
    double loss = 0, rows = 0, correct = 0;
    bool per_row = true;
    for (int64_t first = 0; first < ds->rows; first += batch) {
        int64_t n = ds->rows - first < batch ? ds->rows - first : batch;
        gather_batch(ds, order, first, n, batch, bufs);
        clrun_train_eval_result r;
        clrun_status s = clrun_train_evaluate(t, (const void *const *)bufs, ds->count, n, &r);
        if (s == CLRUN_ERROR_INVALID_ARGUMENT && n < batch) {
            per_row = false; /* a loss evaluated on whole batches: the rest is left out */
            break;
        }
        if (s == CLRUN_ERROR_INVALID_ARGUMENT && first == 0) {
            s = clrun_train_evaluate(t, (const void *const *)bufs, ds->count, -1, &r);
            per_row = false;
        }
        if (s != CLRUN_OK) {
            fprintf(stderr, "clrun train: evaluating: %s\n", clrun_last_error(NULL));
            free(order);
            return s == CLRUN_ERROR_INVALID_ARGUMENT ? 2 : 1;
        }
        double w = per_row ? (double)r.rows : 1.0;
        loss += r.loss * w;
        rows += w;
        correct += r.correct > 0 ? (double)r.correct : 0.0;
    }
    free(order);
    f->has_test = true;
    f->test_loss = rows > 0 ? loss / rows : NAN;
    f->test_accuracy = per_row && rows > 0 ? correct / rows : NAN;
    return 0;
}

/* Whether every rank cut the gradients into the same buckets (each bucket one all-reduce of
 * the same length on every rank, else MPI would pair collectives of different lengths): a hash
 * of the layout in three parts of 22 bits, and the bucket count, summed over the ranks, equal
 * the rank count times this rank's own on every rank only when they are all the same; the
 * verdicts are then summed so that all ranks agree. */
static bool same_buckets(clrun_cli_dist *dist, const clrun_train *t)
{
    const clrun_train_bucket *b;
    int32_t nb = clrun_train_buckets(t, &b);
    uint64_t h = 1469598103934665603ULL; /* FNV-1a over the firsts and counts */
    for (int32_t i = 0; i < nb; i++)
        for (int k = 0; k < 2; k++) {
            uint64_t v = k ? b[i].count : b[i].first;
            for (int byte = 0; byte < 8; byte++) {
                h ^= (v >> (8 * byte)) & 0xff;
                h *= 1099511628211ULL;
            }
        }
    double mine[4] = {(double)nb, (double)(h & 0x3fffff), (double)((h >> 22) & 0x3fffff), (double)(h >> 44)};
    double sums[4];
    memcpy(sums, mine, sizeof sums);
    clrun_cli_dist_sum(dist, sums, 4, "the bucket layout");
    double differ = 0;
    for (int k = 0; k < 4; k++)
        differ += sums[k] != mine[k] * dist->size;
    clrun_cli_dist_sum(dist, &differ, 1, "the bucket layout");
    return differ == 0;
}

/* The last step's bucketed all-reduce, measured from its profile (--trace): the share of the
 * time some bucket's all-reduce was in flight during which a kernel of the step ran; -1
 * without profile or buckets. Both sets of spans are merged into disjoint runs first. */
static double reduce_overlap(clrun_train *t)
{
    const clrun_train_bucket *b;
    const clrun_exec_span *k;
    int32_t nb = clrun_train_buckets(t, &b), nk = clrun_exec_profile(clrun_train_step_exec(t), &k);
    if (nb == 0 || nk == 0 || b[nb - 1].end_ns == 0)
        return -1;
    uint64_t reduce = 0, both = 0, lo = b[0].start_ns, hi = b[0].end_ns;
    hi = hi > lo ? hi : lo;
    for (int32_t i = 1; i <= nb; i++) { /* started in order: each run of the union in turn */
        if (i < nb && b[i].start_ns <= hi) {
            hi = b[i].end_ns > hi ? b[i].end_ns : hi;
            continue;
        }
        reduce += hi - lo;
        /* kernels ran one at a time (an in-order queue): their time within [lo, hi) */
        uint64_t last = lo;
        for (int32_t j = 0; j < nk; j++) {
            uint64_t s = k[j].start_ns > last ? k[j].start_ns : last;
            uint64_t e = k[j].end_ns < hi ? k[j].end_ns : hi;
            if (e > s) {
                both += e - s;
                last = e;
            }
        }
        if (i < nb) {
            lo = b[i].start_ns;
            hi = b[i].end_ns > lo ? b[i].end_ns : lo;
        }
    }
    return reduce ? (double)both / (double)reduce : -1;
}

static json_object *report(const train_args *a, clrun_train *t, const epoch_figures *f,
                           uint64_t steps, const clrun_cli_dist *dist)
{
    clrun_train_stats st;
    clrun_train_stats_get(t, &st);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "graph", json_object_new_string(a->path));
    json_object_object_add(o, "allocator", json_object_new_string(st.exec.allocator ? st.exec.allocator : ""));
    json_object_object_add(o, "mode", json_object_new_string(st.exec.mode ? st.exec.mode : ""));
    json_object_object_add(o, "loss_kind", json_object_new_string(clrun_loss_kind_name(a->loss)));
    json_object_object_add(o, "optimizer", json_object_new_string(clrun_optimizer_kind_name(a->optimizer.kind)));
    json_object_object_add(o, "lr", json_object_new_double(a->optimizer.lr));
    bool global = a->ranks > 1 || a->deterministic || a->devices > 0;
    json_object_object_add(o, "batch", json_object_new_int64(global ? a->global_batch : a->batch));
    if (a->ranks > 1) {
        json_object_object_add(o, "ranks", json_object_new_int(a->ranks));
        json_object_object_add(o, "rank_batch", json_object_new_int64(
            a->deterministic ? (a->end_chunk - a->first_chunk) * a->chunk_rows : a->batch));
    }
    if (a->deterministic) {
        json_object_object_add(o, "chunk_rows", json_object_new_int64(a->chunk_rows));
        json_object_object_add(o, "chunks", json_object_new_int64(a->chunks));
    }
    if (a->ranks > 1 && dist->reduces > 0) { /* rank 0's wait for the gradients' reduction */
        json_object_object_add(o, "reduce_ms_per_step",
                               json_object_new_double(1e3 * dist->reduce_s / (double)dist->reduces));
        json_object_object_add(o, "reduce_ms_last", json_object_new_double(1e3 * dist->last_reduce_s));
        json_object_object_add(o, "reduce_bytes_per_step", json_object_new_int64(
            (int64_t)(sizeof(float) * clrun_train_gradient_count(t))));
        json_object_object_add(o, "buckets", json_object_new_int(clrun_train_buckets(t, NULL)));
        double overlap = reduce_overlap(t);
        if (overlap >= 0) /* with --trace: the last step's, from its profile */
            json_object_object_add(o, "reduce_overlap", json_object_new_double(overlap));
    }
    json_object_object_add(o, "epochs", json_object_new_int(a->epochs));
    json_object_object_add(o, "steps", json_object_new_int64((int64_t)steps));
    json_object_object_add(o, "total_steps", json_object_new_int64((int64_t)st.steps));
    json_object_object_add(o, "loss", json_object_new_double(f->loss));
    if (f->has_accuracy)
        json_object_object_add(o, "accuracy", json_object_new_double(f->accuracy));
    if (f->has_test) {
        json_object_object_add(o, "test_loss", json_object_new_double(f->test_loss));
        if (!isnan(f->test_accuracy))
            json_object_object_add(o, "test_accuracy", json_object_new_double(f->test_accuracy));
    }
    json_object_object_add(o, "samples_per_s", json_object_new_double(f->samples_per_s));
    json_object_object_add(o, "params", json_object_new_int(st.params));
    json_object_object_add(o, "param_bytes", json_object_new_int64((int64_t)st.param_bytes));
    json_object_object_add(o, "state_tensors", json_object_new_int(st.state_tensors));
    json_object_object_add(o, "state_bytes", json_object_new_int64((int64_t)st.state_bytes));
    json_object_object_add(o, "peak_bytes", json_object_new_int64((int64_t)st.peak_bytes));
    json_object_object_add(o, "activation_peak_bytes", json_object_new_int64((int64_t)st.activation_peak_bytes));
    json_object_object_add(o, "lower_bound_bytes", json_object_new_int64((int64_t)st.lower_bound_bytes));
    json_object_object_add(o, "reserved_bytes", json_object_new_int64((int64_t)st.exec.reserved_bytes));
    json_object_object_add(o, "constant_bytes", json_object_new_int64((int64_t)st.exec.constant_bytes));
    json_object_object_add(o, "donated_bytes", json_object_new_int64((int64_t)st.donated_bytes));
    json_object_object_add(o, "donations", json_object_new_int(st.donations));
    json_object_object_add(o, "donated_in_place", json_object_new_int(st.donated_in_place));
    json_object_object_add(o, "unused_donations", json_object_new_int(st.unused_donations));
    json_object_object_add(o, "kernels", json_object_new_int(st.exec.kernels));
    json_object_object_add(o, "fused_groups", json_object_new_int(st.exec.fused_groups));
    json_object_object_add(o, "remat", json_object_new_string(st.remat_policy));
    json_object_object_add(o, "remat_auto", json_object_new_boolean(st.remat_auto));
    json_object_object_add(o, "memory_budget", json_object_new_int64((int64_t)a->memory_budget));
    json_object_object_add(o, "host_bytes", json_object_new_int64((int64_t)st.host_bytes));
    json_object_object_add(o, "planned_peak_bytes", json_object_new_int64((int64_t)st.planned_peak_bytes));
    json_object_object_add(o, "remat_dropped", json_object_new_int(st.remat.dropped));
    json_object_object_add(o, "remat_dropped_bytes", json_object_new_int64((int64_t)st.remat.dropped_bytes));
    json_object_object_add(o, "remat_repeated_nodes", json_object_new_int(st.remat.repeated_nodes));
    json_object_object_add(o, "offloaded_tensors", json_object_new_int(st.exec.offloaded_tensors));
    json_object_object_add(o, "offloaded_bytes", json_object_new_int64((int64_t)st.exec.offloaded_bytes));
    return o;
}

/* The model file again, its initializers the trained values. */
static int save_onnx(const train_args *a, clrun_train *t)
{
    int32_t n = clrun_train_model_tensor_count(t);
    const char **names = calloc((size_t)n + 1, sizeof *names);
    void **data = calloc((size_t)n + 1, sizeof *data);
    uint64_t *bytes = calloc((size_t)n + 1, sizeof *bytes);
    int rc = names && data && bytes ? 0 : 1;
    for (int32_t i = 0; rc == 0 && i < n; i++) {
        clrun_tensor_type type;
        clrun_train_model_tensor_info(t, i, &names[i], &type);
        bytes[i] = clrun_tensor_bytes(&type);
        data[i] = malloc((size_t)bytes[i]);
        if (data[i] == NULL || clrun_train_read_model_tensor(t, i, data[i], bytes[i]) != CLRUN_OK)
            rc = 1;
    }
    char err[1024] = "out of host memory";
    int32_t written = 0;
    if (rc == 0 && clrun_onnx_save_initializers(a->path, a->save_onnx, names, (const void *const *)data,
                                                bytes, n, &written, err, sizeof err) != CLRUN_OK)
        rc = 1;
    if (rc != 0)
        fprintf(stderr, "clrun train: --save-onnx: %s\n", err);
    else if (written < n)
        fprintf(stderr, "clrun train: warning: %d of the %d trained tensors are no initializer of "
                "%s under their name (the import made them): %s keeps their old values\n",
                n - written, n, a->path, a->save_onnx);
    for (int32_t i = 0; data && i < n; i++)
        free(data[i]);
    free(names);
    free(data);
    free(bytes);
    return rc;
}

static const char *mib(uint64_t bytes, char *buf, size_t size)
{
    snprintf(buf, size, "%.2f MiB", (double)bytes / (1024.0 * 1024.0));
    return buf;
}

/* --plan: what the trainer decided, for a person or as one JSON object. */
static int print_plan(const train_args *a, const clrun_train *t)
{
    clrun_train_stats st;
    if (clrun_train_stats_get(t, &st) != CLRUN_OK)
        return 1;
    const clrun_graph *step = clrun_train_step_graph(t);
    /* the recomputed tensors: the outputs of repeated nodes, "NAME.remat" */
    json_object *names = json_object_new_array();
    for (int32_t i = 0; i < clrun_graph_tensor_count(step); i++) {
        const char *name = clrun_graph_tensor_name(step, i);
        size_t length = clrun_remat_copy_of(name);
        if (length > 0)
            json_object_array_add(names, json_object_new_string_len(name, (int)length));
    }
    int32_t n = (int32_t)json_object_array_length(names);
    char b1[32], b2[32], b3[32];
    if (a->json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "model", json_object_new_string(a->path));
        json_object_object_add(o, "remat", json_object_new_string(st.remat_policy));
    json_object_object_add(o, "remat_auto", json_object_new_boolean(st.remat_auto));
        json_object_object_add(o, "memory_budget", json_object_new_int64((int64_t)a->memory_budget));
        json_object_object_add(o, "planned_peak_bytes", json_object_new_int64((int64_t)st.planned_peak_bytes));
        json_object_object_add(o, "mode", json_object_new_string(st.exec.mode));
        json_object_object_add(o, "arena_bytes", json_object_new_int64((int64_t)st.exec.arena_bytes));
        json_object_object_add(o, "param_bytes", json_object_new_int64((int64_t)st.param_bytes));
        json_object_object_add(o, "state_bytes", json_object_new_int64((int64_t)st.state_bytes));
        json_object_object_add(o, "lower_bound_bytes", json_object_new_int64((int64_t)st.lower_bound_bytes));
        json_object_object_add(o, "remat_dropped", json_object_new_int(st.remat.dropped));
        json_object_object_add(o, "remat_dropped_bytes", json_object_new_int64((int64_t)st.remat.dropped_bytes));
        json_object_object_add(o, "remat_repeated_nodes", json_object_new_int(st.remat.repeated_nodes));
        json_object_object_add(o, "remat_repeated_flops", json_object_new_int64((int64_t)st.remat.repeated_flops));
        json_object_object_add(o, "host_bytes", json_object_new_int64((int64_t)st.host_bytes));
        json_object_object_add(o, "offloaded_tensors", json_object_new_int(st.exec.offloaded_tensors));
        json_object_object_add(o, "offloaded_bytes", json_object_new_int64((int64_t)st.exec.offloaded_bytes));
        json_object_object_add(o, "recomputed", names);
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
        return 0;
    }
    printf("step of %s: %d kernels in %s mode; parameters %s, optimizer state %s; lower bound %s\n",
           a->path, (int)st.exec.kernels, st.exec.mode, mib(st.param_bytes, b1, sizeof b1),
           mib(st.state_bytes, b2, sizeof b2), mib(st.lower_bound_bytes, b3, sizeof b3));
    if (a->memory_budget)
        printf("memory budget %s: remat %s; the trainer holds %s (arena %s)\n",
               mib(a->memory_budget, b1, sizeof b1), st.remat_policy,
               mib(st.planned_peak_bytes, b2, sizeof b2), mib(st.exec.arena_bytes, b3, sizeof b3));
    else if (st.planned_peak_bytes)
        printf("fitted to the pool's limit: remat %s; the trainer holds %s (arena %s)\n",
               st.remat_policy, mib(st.planned_peak_bytes, b2, sizeof b2),
               mib(st.exec.arena_bytes, b3, sizeof b3));
    else
        printf("no budget binds: remat %s%s\n", st.remat_policy,
               st.remat_auto ? " (chosen by the step: --remat none turns it off)" : "");
    if (st.host_bytes)
        printf("in host memory (the device maps it): %s of parameters and optimizer state\n",
               mib(st.host_bytes, b1, sizeof b1));
    if (st.exec.offloaded_tensors > 0)
        printf("offloaded: %d activations to host memory and back, %s moved per step\n",
               (int)st.exec.offloaded_tensors, mib(st.exec.offloaded_bytes, b1, sizeof b1));
    if (n == 0) {
        printf("recomputed: nothing\n");
    } else {
        double flops = (double)st.remat.repeated_flops;
        printf("recomputed: %d activations (%s) by %d repeated nodes, %.3g %s more per step:",
               (int)st.remat.dropped, mib(st.remat.dropped_bytes, b1, sizeof b1),
               (int)st.remat.repeated_nodes, flops >= 1e9 ? flops * 1e-9 : flops * 1e-6,
               flops >= 1e9 ? "GFLOP" : "MFLOP");
        for (int32_t k = 0; k < n && k < 40; k++)
            printf("%s %s", k ? "," : "", json_object_get_string(json_object_array_get_idx(names, k)));
        printf("%s\n", n > 40 ? ", ..." : "");
    }
    json_object_put(names);
    return 0;
}

/* --deterministic: one step on the global batch whose rows start at order[first]: this rank's
 * chunks each through the forward and backward passes, their gradients summed in the tree's
 * order over every rank's chunks, divided by the chunks (each chunk's gradient is the mean over
 * its rows, so this is the gradient of the mean over the batch) and applied. loss gets the sum
 * of this rank's rows' losses, correct and rows its rows'. 0, or an exit status with the
 * reason printed after `where`. */
static int deterministic_step(const train_args *a, clrun_train *t, clrun_cli_dist *dist,
                              const dataset *ds, const int64_t *order, int64_t first,
                              void **bufs, clrun_cli_tree *tree, float *grads, uint64_t count,
                              double *loss, double *correct, double *rows, const char *where)
{
    clrun_cli_tree_reset(tree);
    for (int64_t c = a->first_chunk; c < a->end_chunk; c++) {
        gather_batch(ds, order, first + c * a->chunk_rows, a->chunk_rows, a->chunk_rows, bufs);
        float *g = clrun_cli_tree_next(tree);
        clrun_train_step_result r;
        clrun_status s = g ? clrun_train_gradients(t, (const void *const *)bufs, ds->count, g,
                                                   count, &r)
                           : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        if (s == CLRUN_OK && !clrun_cli_tree_push(tree, c, 0))
            s = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        if (s != CLRUN_OK) {
            fprintf(stderr, "clrun train: %s, chunk %" PRId64 ": %s\n", where, c + 1,
                    g && s != CLRUN_ERROR_OUT_OF_HOST_MEMORY ? clrun_last_error(NULL)
                                                             : "out of host memory");
            return s == CLRUN_ERROR_INVALID_ARGUMENT ? 2 : 1;
        }
        *loss += r.loss * (double)a->chunk_rows;
        if (r.correct >= 0) {
            *correct += (double)r.correct;
            *rows += (double)r.rows;
        }
    }
    char what[96], err[256];
    clrun_train_stats st;
    clrun_train_stats_get(t, &st);
    snprintf(what, sizeof what, "the gradient sum of step %llu", (unsigned long long)st.steps + 1);
    const float *sum = clrun_cli_dist_tree_sum(dist, tree, a->chunks, what, err, sizeof err);
    if (sum == NULL) {
        fprintf(stderr, "clrun train: rank %d: %s: %s\n", dist->rank, where, err);
        return 1;
    }
    clrun_cli_tree_mean(sum, count, a->chunks, grads);
    clrun_status s = clrun_train_apply(t, grads, count);
    if (s != CLRUN_OK)
        fprintf(stderr, "clrun train: %s: %s\n", where, clrun_last_error(NULL));
    return s == CLRUN_OK ? 0 : s == CLRUN_ERROR_INVALID_ARGUMENT ? 2 : 1;
}

/* Loads the model, an ONNX model's open batch bound to a->batch (or 32) through the data files'
 * shapes (the bindings it adds are dropped again, so that another call may bind another batch:
 * --devices loads one model per share). 0, or an exit status with the reason printed. */
static int load_model(train_args *a, clrun_graph **out)
{
    int rc = 0, bound = a->io.shape_count;
    clrun_graph *g = NULL;
    /* An ONNX model whose batch is open: each named --data file binds its input's shape, the
     * batch (--batch, or 32) first. The first input's file, unnamed, binds it after a first load. */
    if (clrun_cli_is_onnx(a->path)) {
        for (int k = 0; k < a->data_count && a->io.shape_count < CLRUN_CLI_MAX_BINDINGS; k++) {
            if (a->data[k].name == NULL)
                continue;
            bool given = false;
            for (int s = 0; s < a->io.shape_count; s++)
                given = given || strcmp(a->io.shapes[s].input, a->data[k].name) == 0;
            char err[512];
            clrun_tensor_type pt;
            void *pd = NULL;
            if (given)
                continue;
            clrun_status read = clrun_cli_read_tensor(a->data[k].path, &pt, &pd, err, sizeof err);
            if (read != CLRUN_OK) {
                fprintf(stderr, "clrun train: %s\n", err);
                rc = clrun_cli_data_exit(read);
                goto out;
            }
            free(pd);
            clrun_onnx_shape *sh = &a->io.shapes[a->io.shape_count++];
            sh->input = a->data[k].name;
            sh->rank = pt.rank;
            sh->dims[0] = a->batch ? a->batch : 32;
            for (int d = 1; d < pt.rank; d++)
                sh->dims[d] = pt.shape[d];
        }
    }
    rc = clrun_cli_load_model("train", a->path, &a->io, &g);
    if (rc != 0) {
        if (clrun_cli_is_onnx(a->path) && a->data[0].name == NULL)
            fprintf(stderr, "clrun train: an ONNX model's open batch is bound by naming its input: "
                    "--data NAME=FILE takes the shape of FILE's rows and --batch\n");
        goto out;
    }
    if (clrun_cli_is_onnx(a->path) && a->data_count > 0 && a->data[0].name == NULL) {
        /* bind the first input's open batch through a reload with its shape */
        const clrun_tensor_id *ids;
        if (clrun_graph_inputs(g, &ids) > 0 && a->io.shape_count < CLRUN_CLI_MAX_BINDINGS) {
            char err[512];
            clrun_tensor_type pt;
            void *pd = NULL;
            if (clrun_cli_read_tensor(a->data[0].path, &pt, &pd, err, sizeof err) == CLRUN_OK) {
                free(pd);
                const clrun_tensor_type *it = clrun_graph_tensor_type(g, ids[0]);
                int64_t b = a->batch ? a->batch : it->shape[0];
                if (it->rank == pt.rank && it->shape[0] != b) {
                    clrun_onnx_shape *sh = &a->io.shapes[a->io.shape_count++];
                    static char first[4097];
                    snprintf(first, sizeof first, "%s", clrun_graph_tensor_name(g, ids[0]));
                    sh->input = first;
                    sh->rank = pt.rank;
                    sh->dims[0] = b;
                    for (int d = 1; d < pt.rank; d++)
                        sh->dims[d] = it->shape[d];
                    clrun_graph_destroy(g);
                    g = NULL;
                    if ((rc = clrun_cli_load_model("train", a->path, &a->io, &g)) != 0)
                        goto out;
                }
            }
        }
    }
out:
    a->io.shape_count = bound;
    if (rc != 0) {
        clrun_graph_destroy(g);
        g = NULL;
    }
    *out = g;
    return rc;
}

/* --devices: every device's model, g at device 0's rows (the largest share) and another at the
 * last's when the batch does not divide; without --batch, the model's batch on each device. */
static int devices_models(train_args *a, clrun_cli_devices *devs, const clrun_graph *g,
                          int64_t *global_batch)
{
    if (devs->global_batch == 0)
        clrun_cli_devices_model_batch(devs, a->batch);
    *global_batch = a->global_batch = devs->global_batch;
    devs->graphs[0] = g;
    int64_t rows = devs->rows[devs->count - 1];
    if (rows == devs->rows[0])
        return 0;
    int64_t batch = a->batch;
    a->batch = rows;
    int rc = load_model(a, &devs->graph1);
    a->batch = batch;
    devs->graphs[1] = devs->graph1;
    return rc;
}

int clrun_cli_train(int argc, char **argv)
{
    if (clrun_cli_wants_help(argc, argv)) {
        help();
        return 0;
    }
    train_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != 0)
        return rc;
    /* Under mpirun: this rank's share of every global batch, rows [offset, offset + local). */
    clrun_cli_dist dist;
    if ((rc = clrun_cli_dist_start(&dist, a.mpi_timeout)) != 0) {
        clrun_cli_io_free(&a.io);
        return rc;
    }
    int64_t global_batch = a.batch, batch_offset = 0;
    clrun_cli_devices devs = {0}; /* --devices: each batch's shares over this process's devices */
    if (a.devices_text) {
        if (dist.size > 1) {
            if (dist.rank == 0)
                fprintf(stderr, "clrun train: --devices under mpirun -np %d is not supported: one "
                        "device per rank (CLRUN_DEVICE), or --devices in one process\n",
                        dist.size);
            rc = 2;
        } else {
            rc = clrun_cli_devices_parse(a.devices_text, &devs);
        }
        if (rc == 0 && a.deterministic) /* the chunks' shares; the model runs on a chunk */
            rc = clrun_cli_devices_chunks(&devs, a.batch, a.chunk_rows);
        else if (rc == 0)
            rc = clrun_cli_devices_split(&devs, a.batch, clrun_cli_is_onnx(a.path));
        if (rc != 0) {
            clrun_cli_dist_abort(&dist, rc);
            clrun_cli_dist_finish(&dist);
            clrun_cli_io_free(&a.io);
            return rc;
        }
        if (a.batch && !a.deterministic)
            a.batch = devs.rows[0]; /* the model's batch on device 0 */
        a.devices = devs.count;
    }
    if (a.deterministic) {
        /* this rank's chunks, contiguous; the model runs on one chunk at a time */
        a.chunks = a.batch / a.chunk_rows;
        if (a.chunks < dist.size) {
            if (dist.rank == 0)
                fprintf(stderr, "clrun train: --deterministic: --batch %" PRId64 " in chunks of "
                        "%" PRId64 " rows (--chunk) makes %" PRId64 " chunks, fewer than the %d "
                        "ranks\n", a.batch, a.chunk_rows, a.chunks, dist.size);
            clrun_cli_dist_finish(&dist);
            clrun_cli_io_free(&a.io);
            return 2;
        }
        (void)clrun_cli_share(a.chunks, dist.size, dist.rank, &a.first_chunk, &a.end_chunk);
        batch_offset = a.first_chunk * a.chunk_rows;
        a.batch = a.chunk_rows;
    } else if (dist.size > 1 && a.batch) {
        int64_t rows; /* the model's batch on this rank */
        if (clrun_train_parallel_share(a.batch, dist.size, dist.rank, &batch_offset, &rows)
            != CLRUN_OK) {
            if (dist.rank == 0)
                fprintf(stderr, "clrun train: --batch %" PRId64 " is less than a row for each of "
                        "the %d ranks\n", a.batch, dist.size);
            clrun_cli_dist_finish(&dist);
            clrun_cli_io_free(&a.io);
            return 2;
        }
        a.batch = rows;
    }
    bool leader = dist.rank == 0; /* prints, evaluates and saves */
    if (!leader) {
        a.trace = NULL;
        a.write_step = NULL;
    }
    if (a.trace && (a.trace_file = clrun_run_open_trace("train", a.trace)) == NULL) {
        clrun_cli_dist_abort(&dist, 1);
        clrun_cli_io_free(&a.io);
        return 1;
    }
    if ((a.save_state && !can_write("the train state", a.save_state)) ||
        (a.save_onnx && !can_write("the trained model", a.save_onnx))) {
        if (a.trace_file)
            fclose(a.trace_file);
        clrun_cli_dist_abort(&dist, 1);
        clrun_cli_io_free(&a.io);
        return 1;
    }
    /* Params list: split on commas into a static array of names. */
    char *params_copy = NULL;
    const char *param_names[256];
    int32_t param_count = 0;
    if (a.params_text) {
        params_copy = strdup(a.params_text);
        for (char *p = params_copy ? strtok(params_copy, ",") : NULL; p && param_count < 256;
             p = strtok(NULL, ","))
            param_names[param_count++] = p;
    }
    clrun_graph *g = NULL;
    clrun_context *ctx = NULL;
    clrun_train *t = NULL;
    dataset train_set = {0}, test_set = {0};
    void *bufs[MAX_DATA + 1] = {0};
    int64_t *order = NULL;
    clrun_cli_tree tree = {0}; /* --deterministic: the sums of the chunks */
    float *grads = NULL;       /* --deterministic: the step's gradients */
    if ((rc = load_model(&a, &g)) != 0)
        goto done;
    {
        const clrun_tensor_id *ids;
        int32_t n = clrun_graph_inputs(g, &ids);
        int64_t model_batch = n > 0 && clrun_graph_tensor_type(g, ids[0])->rank > 0
                                  ? clrun_graph_tensor_type(g, ids[0])->shape[0] : 0;
        if (a.batch && model_batch && a.batch != model_batch) {
            if (a.deterministic)
                fprintf(stderr, "clrun train: --deterministic runs the model on chunks of %" PRId64
                        " rows, but its input '%s' takes batches of %" PRId64 " (a .graph file "
                        "fixes its shapes: --chunk %" PRId64 ", or an ONNX model with an open "
                        "batch)\n", a.batch, clrun_graph_tensor_name(g, ids[0]), model_batch,
                        model_batch);
            else if (dist.size > 1)
                fprintf(stderr, "clrun train: rank %d of %d takes %" PRId64 " rows of each batch "
                        "of %" PRId64 ", but the model's input '%s' takes batches of %" PRId64
                        " (a .graph file fixes its shapes: give an ONNX model with an open batch, "
                        "or leave out --batch for the model's batch on every rank)\n", dist.rank,
                        dist.size, a.batch, global_batch, clrun_graph_tensor_name(g, ids[0]),
                        model_batch);
            else
                fprintf(stderr, "clrun train: --batch %" PRId64 ", but the model's input '%s' "
                        "takes batches of %" PRId64 " (a .graph file fixes its shapes)\n", a.batch,
                        clrun_graph_tensor_name(g, ids[0]), model_batch);
            rc = 2;
            goto done;
        }
        a.batch = model_batch;
        if (global_batch == 0) { /* the model's batch on every rank */
            global_batch = a.batch * dist.size;
            batch_offset = a.batch * dist.rank;
        }
        dist.weight = (double)a.batch / (double)global_batch;
        a.ranks = dist.size;
        a.global_batch = global_batch;
    }
    if (devs.count > 0 && !a.deterministic && (rc = devices_models(&a, &devs, g, &global_batch)) != 0)
        goto done;
    clrun_context_options copt;
    clrun_context_options_init(&copt);
    copt.allocator = a.allocator;
    if (devs.count == 0 && clrun_context_create(&copt, &ctx) != CLRUN_OK) {
        fprintf(stderr, "clrun train: %s\n", clrun_last_error(NULL));
        rc = 1;
        goto done;
    }
    clrun_train_options topt;
    clrun_train_options_init(&topt);
    topt.graph.loss = a.loss;
    topt.graph.loss_tensor = a.loss_tensor;
    topt.graph.optimizer = a.optimizer;
    topt.graph.remat = a.remat;
    topt.graph.memory_budget = a.memory_budget;
    topt.exec.profile = a.trace != NULL;
    if (a.params_text) {
        topt.graph.params = param_names;
        topt.graph.param_count = param_count;
    }
    if (a.deterministic) {
        topt.split_update = true; /* each chunk's gradients apart, then one update */
    } else if (dist.size > 1 && a.bucket) {
        topt.bucket_start = clrun_cli_dist_bucket_start;
        topt.bucket_test = clrun_cli_dist_bucket_test;
        topt.bucket_bytes = a.bucket;
        topt.reduce_user = &dist;
    } else if (dist.size > 1) {
        topt.reduce = clrun_cli_dist_reduce;
        topt.reduce_user = &dist;
    }
    if (devs.count > 0) { /* a trainer per device; device 0's reports, evaluates and saves */
        topt.bucket_bytes = a.bucket;
        if (a.deterministic)
            rc = clrun_cli_devices_create_det(&devs, g, &topt, a.allocator);
        else
            rc = clrun_cli_devices_create(&devs, &topt, a.allocator, a.bucket == 0);
        if (rc != 0)
            goto done;
        t = clrun_cli_devices_trainer(&devs, 0);
        ctx = clrun_cli_devices_context(&devs, 0);
    } else if (clrun_train_create(ctx, g, &topt, &t) != CLRUN_OK) {
        fprintf(stderr, "clrun train: %s\n", clrun_last_error(ctx));
        rc = 2;
        goto done;
    }
    if (topt.bucket_start && !same_buckets(&dist, t)) {
        fprintf(stderr, "clrun train: the ranks cut the gradients into different all-reduce buckets (their "
                "step schedules differ: give every rank the same model, options and kind of device, or "
                "--bucket 0)\n");
        rc = 2;
        goto done;
    }
    if (a.write_step) {
        FILE *w = fopen(a.write_step, "w");
        bool ok = w && clrun_graph_write(clrun_train_step_graph(t), w) == CLRUN_OK;
        if (w && fclose(w) != 0)
            ok = false;
        if (!ok) {
            fprintf(stderr, "clrun train: %s: cannot write the step graph\n", a.write_step);
            rc = 1;
            goto done;
        }
    }
    if (a.plan) {
        rc = leader ? print_plan(&a, t) : 0;
        goto done;
    }
    if (leader) {
        const char *const *frozen;
        int32_t nf = clrun_train_frozen(t, &frozen);
        for (int32_t k = 0; k < nf; k++)
            fprintf(stderr, "clrun train: warning: the loss does not depend on %s: it is not "
                    "trained\n", frozen[k]);
    }
    int64_t classes = 0;
    if (a.loss == CLRUN_LOSS_XENT) {
        const clrun_tensor_type *lt = clrun_graph_tensor_type(g, clrun_graph_find(g, a.loss_tensor));
        classes = lt && lt->rank > 0 ? lt->shape[lt->rank - 1] : 0;
    }
    if ((rc = load_dataset(t, a.data, a.data_count, a.labels, classes, "--data", &train_set)) != 0)
        goto done;
    if (a.test_count > 0 &&
        (rc = load_dataset(t, a.test_data, a.test_count, a.test_labels, classes, "--test-data", &test_set)) != 0)
        goto done;
    if (train_set.rows < global_batch) {
        fprintf(stderr, "clrun train: the data has %" PRId64 " rows, fewer than one batch of %"
                PRId64 "\n", train_set.rows, global_batch);
        rc = 2;
        goto done;
    }
    if (dist.size > 1) {
        /* Every rank ready, with the same data: the start is where the ranks drift apart most
         * (loading, compiling), so it may take a minute at least. */
        double rows = (double)train_set.rows, timeout = dist.timeout_s;
        dist.timeout_s = timeout > 60 ? timeout : 60;
        clrun_cli_dist_sum(&dist, &rows, 1, "the start (every rank ready to train)");
        dist.timeout_s = timeout;
        if (rows != (double)train_set.rows * dist.size) {
            fprintf(stderr, "clrun train: rank %d: the ranks' data sets differ in rows (%" PRId64
                    " here): each rank must read the same files\n", dist.rank, train_set.rows);
            rc = 2;
            goto done;
        }
    }
    if (a.resume && devs.count > 0 && (rc = clrun_cli_devices_load(&devs, a.resume)) != 0)
        goto done;
    clrun_status resumed = CLRUN_OK;
    if (a.resume && devs.count == 0 && (resumed = clrun_train_load(t, a.resume)) != CLRUN_OK) {
        fprintf(stderr, "clrun train: %s\n", clrun_last_error(ctx));
        rc = clrun_cli_state_exit(resumed);
        goto done;
    }
    for (int k = 0; k < train_set.count; k++) {
        clrun_tensor_type ft;
        clrun_train_feed_info(t, k, NULL, &ft);
        bufs[k] = malloc((size_t)clrun_tensor_bytes(&ft));
        if (bufs[k] == NULL) {
            fprintf(stderr, "clrun train: out of host memory\n");
            rc = 1;
            goto done;
        }
    }
    order = malloc(sizeof *order * (size_t)train_set.rows);
    uint64_t grad_count = clrun_train_gradient_count(t);
    bool det_here = a.deterministic && devs.count == 0; /* the chunks summed here, not per device */
    if (det_here) {
        clrun_cli_tree_init(&tree, grad_count);
        grads = malloc(sizeof *grads * (size_t)(grad_count ? grad_count : 1));
    }
    if (order == NULL || (det_here && grads == NULL)) {
        fprintf(stderr, "clrun train: out of host memory\n");
        rc = 1;
        goto done;
    }
    epoch_figures f = {0};
    uint64_t steps = 0;
    int64_t per_epoch = train_set.rows / global_batch;
    /* A resumed run goes on with the epoch after the saved one, in the order that epoch would
     * have had: the same steps as a run never interrupted. */
    clrun_train_stats before;
    clrun_train_stats_get(t, &before);
    int first_epoch = (int)(before.steps / (uint64_t)per_epoch);
    for (int epoch = 0; epoch < a.epochs; epoch++) {
        if (a.shuffle)
            permute(order, train_set.rows, a.shuffle_seed, first_epoch + epoch);
        else
            for (int64_t i = 0; i < train_set.rows; i++)
                order[i] = i;
        double start = now_s(), loss = 0, correct = 0, rows = 0;
        for (int64_t b = 0; b < per_epoch; b++) {
            if (a.deterministic && devs.count > 0) { /* the global batch, sliced per chunk */
                char where[64];
                snprintf(where, sizeof where, "epoch %d, batch %" PRId64, epoch + 1, b + 1);
                gather_batch(&train_set, order, b * global_batch, global_batch, global_batch,
                             devs.batch);
                if ((rc = clrun_cli_devices_det_step(&devs, where, &loss, &correct, &rows)) != 0)
                    goto done;
                steps++;
                continue;
            }
            if (a.deterministic) {
                char where[64];
                snprintf(where, sizeof where, "epoch %d, batch %" PRId64, epoch + 1, b + 1);
                if ((rc = deterministic_step(&a, t, &dist, &train_set, order, b * global_batch,
                                             bufs, &tree, grads, grad_count, &loss, &correct,
                                             &rows, where)) != 0)
                    goto done;
                steps++;
                continue;
            }
            if (devs.count > 0) {
                char where[64];
                snprintf(where, sizeof where, "epoch %d, batch %" PRId64, epoch + 1, b + 1);
                for (int32_t k = 0; k < devs.count; k++)
                    gather_batch(&train_set, order, b * global_batch + devs.first[k], devs.rows[k],
                                 devs.rows[k], devs.bufs[k]);
                if ((rc = clrun_cli_devices_step(&devs, where, &loss, &correct, &rows)) != 0)
                    goto done;
                steps++;
                continue;
            }
            gather_batch(&train_set, order, b * global_batch + batch_offset, a.batch, a.batch, bufs);
            clrun_train_step_result r;
            clrun_status s = clrun_train_step(t, (const void *const *)bufs, train_set.count, &r);
            if (s != CLRUN_OK) {
                fprintf(stderr, "clrun train: epoch %d, batch %" PRId64 ": %s\n", epoch + 1, b + 1,
                        clrun_last_error(ctx));
                rc = s == CLRUN_ERROR_INVALID_ARGUMENT ? 2 : 1;
                goto done;
            }
            steps++;
            loss += dist.size > 1 ? r.loss * (double)a.batch : r.loss;
            if (r.correct >= 0) {
                correct += (double)r.correct;
                rows += (double)r.rows;
            }
        }
        if (dist.size > 1) { /* the epoch over every rank's rows */
            double sums[3] = {loss, correct, rows};
            clrun_cli_dist_sum(&dist, sums, 3, "the sum of the epoch's losses");
            loss = sums[0];
            correct = sums[1];
            rows = sums[2];
        }
        if (dist.size > 1 || a.deterministic || devs.count > 0) /* the sum over each step's rows */
            loss /= (double)global_batch;
        double took = now_s() - start;
        f.loss = loss / (double)per_epoch;
        f.has_accuracy = rows > 0;
        f.accuracy = rows > 0 ? correct / rows : 0;
        f.samples_per_s = took > 0 ? (double)(per_epoch * global_batch) / took : 0;
        if (!leader)
            continue;
        if (test_set.count > 0 && (rc = evaluate(t, &test_set, a.batch, bufs, &f)) != 0)
            goto done;
        clrun_train_stats st;
        clrun_train_stats_get(t, &st);
        char peak[32];
        FILE *out = a.json ? stderr : stdout;
        fprintf(out, "epoch %d/%d  loss %.4f", first_epoch + epoch + 1, first_epoch + a.epochs, f.loss);
        if (f.has_accuracy)
            fprintf(out, "  accuracy %.2f%%", 100 * f.accuracy);
        if (f.has_test) {
            fprintf(out, "  test loss %.4f", f.test_loss);
            if (!isnan(f.test_accuracy))
                fprintf(out, "  test accuracy %.2f%%", 100 * f.test_accuracy);
        }
        fprintf(out, "  %.0f samples/s  peak %s\n", f.samples_per_s, mib(st.peak_bytes, peak, sizeof peak));
        fflush(out);
    }
    if (!leader)
        goto done; /* rc 0 */
    int agree = -1; /* --devices: every device's parameters device 0's (a warning if not) */
    if (devs.count > 1 && (agree = clrun_cli_devices_agree(&devs)) < 0) {
        rc = 1;
        goto done;
    }
    if (a.save_state && clrun_train_save(t, a.save_state) != CLRUN_OK) {
        fprintf(stderr, "clrun train: %s\n", clrun_last_error(ctx));
        rc = 1;
        goto done;
    }
    if (a.save_onnx && (rc = save_onnx(&a, t)) != 0)
        goto done;
    if (a.trace_file) {
        /* under mpirun, the last step's reduction after its backward pass (--deterministic:
         * after its last chunk's) */
        const char *host = dist.reduces == 0 ? NULL : a.deterministic
                               ? "gradient sum (gather to rank 0, broadcast)"
                               : "gradient all-reduce";
        /* bucketed: each bucket's all-reduce where it ran, beside the backward pass */
        const clrun_train_bucket *b;
        int32_t nb = dist.reduces == 0 ? 0 : clrun_train_buckets(t, &b);
        clrun_run_host_span *spans = nb ? calloc((size_t)nb, sizeof *spans) : NULL;
        char (*names)[64] = nb ? calloc((size_t)nb, sizeof *names) : NULL;
        for (int32_t i = 0; spans && names && i < nb; i++) {
            snprintf(names[i], sizeof names[i], "gradient all-reduce, bucket %d (%llu floats)",
                     (int)i, (unsigned long long)b[i].count);
            uint64_t end = b[i].end_ns > b[i].start_ns ? b[i].end_ns : b[i].start_ns;
            spans[i] = (clrun_run_host_span){names[i], b[i].start_ns / 1e3,
                                             (double)(end - b[i].start_ns) / 1e3};
        }
        if (spans && names && b[nb - 1].end_ns > 0)
            rc = clrun_run_write_trace_spans(a.trace_file, "train", a.trace,
                                             clrun_train_step_exec(t), clrun_train_step_graph(t),
                                             ctx, spans, nb);
        else
            rc = clrun_run_write_trace_host(a.trace_file, "train", a.trace,
                                            clrun_train_step_exec(t), clrun_train_step_graph(t),
                                            ctx, host, dist.last_reduce_s);
        free(spans);
        free(names);
        a.trace_file = NULL;
        if (rc != 0)
            goto done;
    }
    {
        clrun_train_stats st;
        clrun_train_stats_get(t, &st);
        char b1[32], b2[32], b3[32], b4[32];
        if (!a.json) {
            printf("trained %d parameter tensors (%s) with %s, state %s; step peak %s (lower bound "
                   "%s); donation: %d of %d in place\n", st.params, mib(st.param_bytes, b1, sizeof b1),
                   clrun_optimizer_kind_name(a.optimizer.kind), mib(st.state_bytes, b2, sizeof b2),
                   mib(st.peak_bytes, b3, sizeof b3), mib(st.lower_bound_bytes, b4, sizeof b4),
                   st.donated_in_place, st.donated_in_place + st.unused_donations);
            const char *const *names;
            int32_t nu = clrun_train_unused_donations(t, &names);
            for (int32_t k = 0; k < nu; k++)
                printf("  not in place: %s (the step holds it twice)\n", names[k]);
            /* a searched policy lists every tensor it drops: its head only */
            int shown = (int)strlen(st.remat_policy) > 60 ? 60 : (int)strlen(st.remat_policy);
            const char *more = shown < (int)strlen(st.remat_policy) ? ",..." : "";
            if (st.remat.repeated_nodes > 0)
                printf("remat %.*s%s%s: %d activations (%s) recomputed in the backward pass by %d "
                       "repeated nodes\n", shown, st.remat_policy, more,
                       st.remat_auto ? " (chosen by the step; --remat none turns it off)" : "",
                       st.remat.dropped, mib(st.remat.dropped_bytes, b1, sizeof b1),
                       st.remat.repeated_nodes);
            if (a.memory_budget)
                printf("memory budget %s: remat %.*s%s, planned peak %s\n",
                       mib(a.memory_budget, b1, sizeof b1), shown, st.remat_policy, more,
                       mib(st.planned_peak_bytes, b2, sizeof b2));
            else if (st.planned_peak_bytes)
                printf("fitted to the pool's limit: remat %.*s%s, planned peak %s\n", shown,
                       st.remat_policy, more, mib(st.planned_peak_bytes, b2, sizeof b2));
            if (st.host_bytes)
                printf("in host memory (the device maps it): %s of parameters and optimizer "
                       "state\n", mib(st.host_bytes, b1, sizeof b1));
            if (st.exec.offloaded_tensors > 0)
                printf("offloaded: %d activations to host memory and back, %s moved per step\n",
                       (int)st.exec.offloaded_tensors, mib(st.exec.offloaded_bytes, b1, sizeof b1));
        } else {
            json_object *o = report(&a, t, &f, steps, &dist);
            if (devs.count > 0) {
                clrun_cli_devices_report(&devs, o);
                clrun_cli_devices_report_agree(o, agree);
            }
            printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
            json_object_put(o);
        }
    }
    rc = 0;
done:
    if (rc != 0)
        clrun_cli_dist_abort(&dist, rc); /* the other ranks would wait for this one */
    clrun_cli_dist_finish(&dist);
    if (a.trace_file)
        fclose(a.trace_file);
    for (int k = 0; k < MAX_DATA + 1; k++)
        free(bufs[k]);
    free(order);
    free(grads);
    clrun_cli_tree_free(&tree);
    dataset_free(&train_set);
    dataset_free(&test_set);
    if (devs.count > 0) { /* device 0's, which the parallel trainer frees */
        t = NULL;
        ctx = NULL;
    }
    clrun_cli_devices_free(&devs);
    clrun_train_destroy(t);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
    clrun_cli_io_free(&a.io);
    free(params_copy);
    return rc;
}
