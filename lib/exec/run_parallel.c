/* Data-parallel inference over several devices of one process (<clrun/run_parallel.h>): a
 * context and an executor per device, each at its share of the global batch; a run cuts the
 * caller's inputs along their first dimension (core/share.h's split), runs every device on a
 * host thread of its own (device 0 on the caller's) and reads each device's outputs straight
 * into its rows of the caller's buffers. The devices never wait for one another, so a failing
 * one cannot hang the others: every thread is joined, then the first failure is reported. */
#include <clrun/run_parallel.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/memory.h>
#include <clrun/memory_stats.h>

#include "core/error.h"
#include "core/share.h"
#include "core/util.h"
#include "device/context.h"
#include "memory/pool.h"
#include "graph/types.h"
#include "exec/run_parallel_internal.h"

/* How one input or output of the models is laid out at the global batch. */
typedef struct tensor_io {
    bool split;          /* cut along the first dimension (else the same bytes to every device) */
    bool donated;        /* an input the models donate: the executor consumes its buffer */
    uint64_t row_bytes;  /* split: the bytes of one row (the same on every device) */
    uint64_t bytes;      /* at the global batch (the caller's size) */
} tensor_io;

typedef struct device_slot {
    struct clrun_run_parallel *p;
    int32_t k;
    unsigned device;
    const clrun_graph *model;
    clrun_context *ctx;
    clrun_exec *exec;
    int64_t first, rows;
    clrun_buffer *buffers;  /* per input, during a run */
    clrun_status status;    /* the last run's */
    char message[CLRUN__ERROR_MAX];
    double wall_ms;
} device_slot;

struct clrun_run_parallel {
    int32_t count;
    device_slot *dev;
    int64_t batch;
    int32_t input_count, output_count;
    tensor_io *in, *out;
    /* the run under way: the caller's arrays */
    const void *const *inputs;
    void *const *outputs;
    double wall_ms;
    int32_t fail_k; /* clrun__run_parallel_fail_at; -1 none */
};

void clrun_run_parallel_options_init(clrun_run_parallel_options *options)
{
    if (options)
        memset(options, 0, sizeof *options);
}

void clrun_run_parallel_destroy(clrun_run_parallel *p)
{
    if (p == NULL)
        return;
    for (int32_t k = 0; p->dev && k < p->count; k++) {
        clrun_exec_destroy(p->dev[k].exec);
        clrun_context_destroy(p->dev[k].ctx);
        free(p->dev[k].buffers);
    }
    free(p->dev);
    free(p->in);
    free(p->out);
    free(p);
}

/* Device k's model against device 0's: the same inputs and outputs (count, names, dtypes, ranks),
 * and the layout of each (split or whole) decided and checked on every device. */
static clrun_status check_tensors(clrun_run_parallel *p, bool outputs)
{
    const char *what = outputs ? "output" : "input";
    const clrun_tensor_id *ids0;
    const clrun_graph *g0 = p->dev[0].model;
    int32_t n = outputs ? clrun_graph_outputs(g0, &ids0) : clrun_graph_inputs(g0, &ids0);
    tensor_io *io = calloc((size_t)n + 1, sizeof *io);
    if (io == NULL)
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                "run_parallel: out of host memory");
    if (outputs) {
        p->out = io;
        p->output_count = n;
    } else {
        p->in = io;
        p->input_count = n;
    }
    for (int32_t k = 1; k < p->count; k++) {
        const clrun_tensor_id *ids;
        const clrun_graph *g = p->dev[k].model;
        int32_t nk = outputs ? clrun_graph_outputs(g, &ids) : clrun_graph_inputs(g, &ids);
        if (nk != n)
            return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                    "run_parallel: the model of device %u (share %d) has %d %ss, "
                                    "device %u's (share 0) %d: the models differ",
                                    p->dev[k].device, (int)k, (int)nk, what, p->dev[0].device,
                                    (int)n);
        for (int32_t i = 0; i < n; i++) {
            const char *a = clrun_graph_tensor_name(g0, ids0[i]);
            const char *b = clrun_graph_tensor_name(g, ids[i]);
            if (strcmp(a ? a : "", b ? b : "") != 0)
                return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                        "run_parallel: %s %d is '%s' on device %u (share %d), "
                                        "'%s' on device %u (share 0): the models differ", what,
                                        (int)i, b ? b : "", p->dev[k].device, (int)k, a ? a : "",
                                        p->dev[0].device);
        }
    }
    for (int32_t i = 0; i < n; i++) {
        const char *name = clrun_graph_tensor_name(g0, ids0[i]);
        /* split when its first dimension is its device's rows on every device */
        bool split = true;
        for (int32_t k = 0; k < p->count; k++) {
            const clrun_tensor_id *ids;
            const clrun_graph *g = p->dev[k].model;
            if (outputs)
                clrun_graph_outputs(g, &ids);
            else
                clrun_graph_inputs(g, &ids);
            const clrun_tensor_type *t = clrun_graph_tensor_type(g, ids[i]);
            split = split && t->rank >= 1 && t->shape[0] == p->dev[k].rows;
        }
        const clrun_tensor_type *t0 = clrun_graph_tensor_type(g0, ids0[i]);
        if (!split && outputs) {
            char type[CLRUN__TYPE_TEXT];
            return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                    "run_parallel: output '%s' (%s on device %u, share 0 of %lld "
                                    "rows) has no batch dimension (a first dimension of its "
                                    "device's rows): its shares cannot be concatenated",
                                    name ? name : "", clrun__type_format(t0, type, sizeof type),
                                    p->dev[0].device, (long long)p->dev[0].rows);
        }
        io[i].split = split;
        io[i].donated = !outputs && clrun_graph_tensor_donated(g0, ids0[i]);
        if (split) {
            clrun_tensor_type one = *t0;
            one.shape[0] = 1;
            io[i].row_bytes = clrun_tensor_bytes(&one);
            if (io[i].row_bytes * (uint64_t)t0->shape[0] != clrun_tensor_bytes(t0))
                return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                        "run_parallel: %s '%s': its rows are not whole bytes "
                                        "(a packed dtype): it cannot be split", what,
                                        name ? name : "");
            io[i].bytes = io[i].row_bytes * (uint64_t)p->batch;
        } else {
            io[i].bytes = clrun_tensor_bytes(t0);
        }
        for (int32_t k = 1; k < p->count; k++) {
            const clrun_tensor_id *ids;
            const clrun_graph *g = p->dev[k].model;
            if (outputs)
                clrun_graph_outputs(g, &ids);
            else
                clrun_graph_inputs(g, &ids);
            clrun_tensor_type t = *clrun_graph_tensor_type(g, ids[i]), want = *t0;
            if (split)
                t.shape[0] = want.shape[0] = 1;
            if (!clrun__type_equal(&t, &want) ||
                clrun_graph_tensor_donated(g, ids[i]) != io[i].donated) {
                char a[CLRUN__TYPE_TEXT], b[CLRUN__TYPE_TEXT];
                return clrun__error_set(
                    NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                    "run_parallel: %s '%s' is %s%s on device %u (share %d), %s%s on device %u "
                    "(share 0)%s: the models differ", what, name ? name : "",
                    clrun__type_format(clrun_graph_tensor_type(g, ids[i]), a, sizeof a),
                    clrun_graph_tensor_donated(g, ids[i]) ? " (donated)" : "", p->dev[k].device,
                    (int)k, clrun__type_format(t0, b, sizeof b), io[i].donated ? " (donated)" : "",
                    p->dev[0].device,
                    split ? ", past the first dimension (the rows)"
                          : " (an input without the batch dimension goes whole to every device)");
            }
        }
    }
    return CLRUN_OK;
}

/* Each model's rows (its first input's first dimension), which must be the split's shares of
 * their sum. */
static clrun_status check_shares(const clrun_graph *const *models, const unsigned *devices,
                                 int32_t count, int64_t *batch)
{
    int64_t all = 0;
    for (int32_t k = 0; k < count; k++) {
        const clrun_tensor_id *ids;
        if (models[k] == NULL)
            return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                    "run_parallel: no model for device %u (share %d)", devices[k],
                                    (int)k);
        const clrun_tensor_type *t = clrun_graph_inputs(models[k], &ids) > 0
                                         ? clrun_graph_tensor_type(models[k], ids[0]) : NULL;
        if (t == NULL || t->rank < 1 || t->shape[0] < 1)
            return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                    "run_parallel: the model of device %u (share %d) has no input "
                                    "of rows (a first dimension of its first input: its share of "
                                    "the batch)", devices[k], (int)k);
        all += t->shape[0];
    }
    for (int32_t k = 0; k < count; k++) {
        const clrun_tensor_id *ids;
        clrun_graph_inputs(models[k], &ids);
        int64_t rows = clrun_graph_tensor_type(models[k], ids[0])->shape[0], want = 0;
        if (clrun__batch_share(all, count, k, NULL, &want) != CLRUN_OK)
            return CLRUN_ERROR_INVALID_ARGUMENT; /* cannot happen: every share has a row */
        if (rows != want) {
            char shares[512];
            size_t len = 0;
            for (int32_t j = 0; j < count && len < sizeof shares - 32; j++) {
                int64_t r = 0;
                clrun__batch_share(all, count, j, NULL, &r);
                len += (size_t)snprintf(shares + len, sizeof shares - len, "%s%lld",
                                        j ? " + " : "", (long long)r);
            }
            return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                    "run_parallel: the model of device %u (share %d) takes %lld "
                                    "rows (its first input's first dimension); the split of the "
                                    "global batch of %lld rows over %d devices gives it %lld "
                                    "(%s): build each device's model at its share, with a "
                                    "batched input first", devices[k], (int)k, (long long)rows,
                                    (long long)all, (int)count, (long long)want, shares);
        }
    }
    *batch = all;
    return CLRUN_OK;
}

clrun_status clrun_run_parallel_create(const clrun_graph *const *models, const unsigned *devices,
                                       int32_t count, const clrun_run_parallel_options *options,
                                       clrun_run_parallel **out)
{
    if (out)
        *out = NULL;
    if (out == NULL || (count > 0 && (models == NULL || devices == NULL)))
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "run_parallel: NULL argument");
    if (count < 1)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                "run_parallel: %d devices: at least one is needed", (int)count);
    clrun_run_parallel_options defaults;
    if (options == NULL) {
        clrun_run_parallel_options_init(&defaults);
        options = &defaults;
    }
    int64_t batch = 0;
    clrun_status st = check_shares(models, devices, count, &batch);
    if (st != CLRUN_OK)
        return st;
    clrun_run_parallel *p = calloc(1, sizeof *p);
    if (p == NULL || (p->dev = calloc((size_t)count, sizeof *p->dev)) == NULL) {
        free(p);
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                "run_parallel: out of host memory");
    }
    p->count = count;
    p->batch = batch;
    p->fail_k = -1;
    for (int32_t k = 0; k < count; k++) {
        device_slot *d = &p->dev[k];
        d->p = p;
        d->k = k;
        d->device = devices[k];
        d->model = models[k];
        clrun__batch_share(batch, count, k, &d->first, &d->rows);
    }
    st = check_tensors(p, false);
    if (st == CLRUN_OK)
        st = check_tensors(p, true);
    for (int32_t k = 0; st == CLRUN_OK && k < count; k++) {
        device_slot *d = &p->dev[k];
        if ((d->buffers = calloc((size_t)p->input_count + 1, sizeof *d->buffers)) == NULL) {
            st = clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                  "run_parallel: out of host memory");
            break;
        }
        char part[64];
        snprintf(part, sizeof part, "share %d", (int)k);
        st = clrun__context_create_on(d->device, options->platform, options->allocator,
                                      options->pool_limit, "run_parallel", part, &d->ctx);
        if (st != CLRUN_OK)
            break;
        st = clrun_exec_create(d->ctx, d->model, options->exec, &d->exec);
        if (st != CLRUN_OK) {
            char why[CLRUN__ERROR_MAX];
            snprintf(why, sizeof why, "%s", clrun_last_error(d->ctx));
            st = clrun__error_set(NULL, st, "run_parallel: device %u (share %d, %lld rows): its "
                                  "executor: %s", d->device, (int)k, (long long)d->rows, why);
        }
    }
    if (st != CLRUN_OK) {
        clrun_run_parallel_destroy(p);
        return st;
    }
    *out = p;
    return CLRUN_OK;
}

int32_t clrun_run_parallel_count(const clrun_run_parallel *p)
{
    return p ? p->count : 0;
}

int64_t clrun_run_parallel_batch(const clrun_run_parallel *p)
{
    return p ? p->batch : 0;
}

uint64_t clrun_run_parallel_input_bytes(const clrun_run_parallel *p, int32_t i)
{
    return p && i >= 0 && i < p->input_count ? p->in[i].bytes : 0;
}

uint64_t clrun_run_parallel_output_bytes(const clrun_run_parallel *p, int32_t i)
{
    return p && i >= 0 && i < p->output_count ? p->out[i].bytes : 0;
}

/* Device d's run: its rows of the inputs in, its executor, its rows of the outputs out. Records
 * its status and, on failure, its context's message (with what failed). */
static void *device_run(void *arg)
{
    device_slot *d = arg;
    clrun_run_parallel *p = d->p;
    double start = clrun__now();
    clrun_status st = CLRUN_OK;
    const char *what = NULL;
    int32_t made = 0;
    bool ran = false, injected = false;
    const clrun_tensor_id *ids;
    clrun_graph_inputs(d->model, &ids);
    memset(d->buffers, 0, sizeof *d->buffers * (size_t)p->input_count);
    for (; made < p->input_count; made++) {
        const tensor_io *io = &p->in[made];
        const clrun_tensor_type *t = clrun_graph_tensor_type(d->model, ids[made]);
        if (clrun_tensor_empty(t))
            continue; /* the zero buffer: no memory, never read */
        uint64_t bytes = io->split ? io->row_bytes * (uint64_t)d->rows : io->bytes;
        const char *src = (const char *)p->inputs[made] +
                          (io->split ? (size_t)io->row_bytes * (size_t)d->first : 0);
        st = clrun_alloc(d->ctx, bytes, &d->buffers[made]);
        if (st != CLRUN_OK) {
            what = "its input buffers";
            break;
        }
        st = clrun_buffer_write(d->ctx, &d->buffers[made], src);
        if (st != CLRUN_OK) {
            made++;
            what = "copying its inputs";
            break;
        }
    }
    if (st == CLRUN_OK && d->k == p->fail_k) {
        st = CLRUN_ERROR_OPENCL;
        injected = true;
    }
    if (st == CLRUN_OK) {
        ran = true;
        st = clrun_exec_run(d->exec, d->buffers, p->input_count);
        if (st != CLRUN_OK)
            what = "running";
    }
    for (int32_t o = 0; st == CLRUN_OK && o < p->output_count; o++) {
        const tensor_io *io = &p->out[o];
        uint64_t bytes = io->row_bytes * (uint64_t)d->rows;
        char *dst = (char *)p->outputs[o] + (size_t)io->row_bytes * (size_t)d->first;
        st = clrun_exec_read_output(d->exec, o, bytes ? dst : NULL, bytes);
        if (st != CLRUN_OK)
            what = "reading its outputs";
    }
    d->status = st;
    if (injected)
        snprintf(d->message, sizeof d->message, "injected failure");
    else if (st != CLRUN_OK)
        snprintf(d->message, sizeof d->message, "%s: %s", what, clrun_last_error(d->ctx));
    /* A donated input the run took is the executor's (consumed, or given back by a failed run);
     * one a run refused before taking it is still this device's to free. */
    for (int32_t i = 0; i < made && i < p->input_count; i++)
        if (d->buffers[i].mem &&
            !(ran && p->in[i].donated &&
              clrun__pool_check_caller(d->ctx, &d->buffers[i], "run_parallel") != CLRUN_OK))
            clrun_free(d->ctx, &d->buffers[i]);
    d->wall_ms = (clrun__now() - start) * 1e3;
    return NULL;
}

/* The caller's inputs (or outputs): count as the models', every pointer given, each of the size
 * at the global batch. */
static clrun_status check_io(const clrun_run_parallel *p, bool outputs, const void *const *data,
                             const uint64_t *bytes, int32_t count)
{
    const char *what = outputs ? "output" : "input";
    int32_t want = outputs ? p->output_count : p->input_count;
    const tensor_io *io = outputs ? p->out : p->in;
    if (count != want)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                "run_parallel: %d %ss given, the models have %d", (int)count, what,
                                (int)want);
    if (want > 0 && (data == NULL || bytes == NULL))
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                "run_parallel: NULL %ss (or their sizes)", what);
    const clrun_tensor_id *ids;
    if (outputs)
        clrun_graph_outputs(p->dev[0].model, &ids);
    else
        clrun_graph_inputs(p->dev[0].model, &ids);
    for (int32_t i = 0; i < want; i++) {
        const char *name = clrun_graph_tensor_name(p->dev[0].model, ids[i]);
        if (data[i] == NULL && io[i].bytes > 0)
            return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                    "run_parallel: %s '%s' is NULL", what, name ? name : "");
        if (bytes[i] == io[i].bytes)
            continue;
        if (io[i].split)
            return clrun__error_set(NULL, CLRUN_ERROR_INVALID_SIZE,
                                    "run_parallel: %s '%s' at the global batch needs %lld rows x "
                                    "%llu bytes = %llu bytes, %llu given", what, name ? name : "",
                                    (long long)p->batch, (unsigned long long)io[i].row_bytes,
                                    (unsigned long long)io[i].bytes,
                                    (unsigned long long)bytes[i]);
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_SIZE,
                                "run_parallel: %s '%s' (without the batch dimension: the same to "
                                "every device) needs %llu bytes, %llu given", what,
                                name ? name : "", (unsigned long long)io[i].bytes,
                                (unsigned long long)bytes[i]);
    }
    return CLRUN_OK;
}

clrun_status clrun_run_parallel_run(clrun_run_parallel *p, const void *const *inputs,
                                    const uint64_t *input_bytes, int32_t input_count,
                                    void *const *outputs, const uint64_t *output_bytes,
                                    int32_t output_count)
{
    if (p == NULL)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "run_parallel: NULL argument");
    clrun_status st = check_io(p, false, inputs, input_bytes, input_count);
    if (st == CLRUN_OK)
        st = check_io(p, true, (const void *const *)outputs, output_bytes, output_count);
    if (st != CLRUN_OK)
        return st;
    p->inputs = inputs;
    p->outputs = outputs;
    for (int32_t k = 0; k < p->count; k++) {
        p->dev[k].status = CLRUN_OK;
        p->dev[k].message[0] = '\0';
        p->dev[k].wall_ms = 0;
    }
    pthread_t *threads = calloc((size_t)p->count, sizeof *threads);
    if (threads == NULL)
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                "run_parallel: out of host memory");
    double start = clrun__now();
    int32_t started = 1; /* threads 1 .. started - 1 run */
    for (; started < p->count; started++)
        if (pthread_create(&threads[started], NULL, device_run, &p->dev[started]) != 0)
            break;
    if (started == p->count)
        device_run(&p->dev[0]);
    for (int32_t k = 1; k < started; k++)
        pthread_join(threads[k], NULL);
    free(threads);
    p->wall_ms = (clrun__now() - start) * 1e3;
    p->inputs = NULL;
    p->outputs = NULL;
    if (started < p->count)
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                "run_parallel: cannot start the thread of device %u (share %d)",
                                p->dev[started].device, (int)started);
    for (int32_t k = 0; k < p->count; k++) {
        const device_slot *d = &p->dev[k];
        if (d->status != CLRUN_OK)
            return clrun__error_set(NULL, d->status,
                                    "run_parallel: device %u (share %d, rows [%lld, %lld)): %s",
                                    d->device, (int)k, (long long)d->first,
                                    (long long)(d->first + d->rows), d->message);
    }
    return CLRUN_OK;
}

clrun_status clrun_run_parallel_device_info_get(const clrun_run_parallel *p, int32_t k,
                                                clrun_run_parallel_device_info *out)
{
    if (p == NULL || out == NULL || k < 0 || k >= p->count)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "run_parallel: no device %d",
                                (int)k);
    const device_slot *d = &p->dev[k];
    clrun_exec_stats es;
    clrun_memory_stats ms;
    clrun_status st = clrun_exec_stats_get(d->exec, &es);
    if (st == CLRUN_OK)
        st = clrun_memory_stats_get(d->ctx, &ms);
    if (st != CLRUN_OK) {
        char why[CLRUN__ERROR_MAX];
        snprintf(why, sizeof why, "%s", clrun_last_error(d->ctx));
        return clrun__error_set(NULL, st, "run_parallel: device %u (share %d): its statistics: %s",
                                d->device, (int)k, why);
    }
    memset(out, 0, sizeof *out);
    out->device = d->device;
    out->device_name = clrun_context_device(d->ctx)->name;
    out->first_row = d->first;
    out->rows = d->rows;
    out->weights_bytes = es.constant_bytes;
    out->peak_bytes = ms.in_use_peak;
    out->run_peak_bytes = es.peak_bytes;
    out->wall_ms = d->wall_ms;
    out->run_ms = es.wall_ms;
    return CLRUN_OK;
}

double clrun_run_parallel_wall_ms(const clrun_run_parallel *p)
{
    return p ? p->wall_ms : 0;
}

clrun_context *clrun_run_parallel_context(const clrun_run_parallel *p, int32_t k)
{
    return p && k >= 0 && k < p->count ? p->dev[k].ctx : NULL;
}

clrun_exec *clrun_run_parallel_exec(const clrun_run_parallel *p, int32_t k)
{
    return p && k >= 0 && k < p->count ? p->dev[k].exec : NULL;
}

void clrun__run_parallel_fail_at(clrun_run_parallel *p, int32_t k)
{
    if (p)
        p->fail_k = k;
}
