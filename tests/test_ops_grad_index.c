/* The ops training needs beside the gradient transform, on a real device (POCL in CI) through
 * the graph API and an executor: softmax_xent and softmax_xent_grad (in every row kernel), the
 * run-time error of a label outside its classes, gather_grad in both forms, and dropout, whose
 * mask is held bit for bit to the host's (graph/dropout_mask.h); each against a plain C
 * reference (tests/op_reference.c) and their type rules' refusals.
 *
 * Tolerance: an output d with reference r (in double) passes when |d - r| <= 1e-5 (|r| + s) +
 * 1e-35, s being the reference's scale (the magnitude of the terms that made it) and 1e-35 what
 * f32 cannot hold (the softmax of a logit far below the row's maximum underflows). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include <clrun/clrun.h>

#include "device_test.h"
#include "graph/dropout_mask.h"
#include "graph/op.h"
#include "op_args.h"
#include "op_reference.h"
#include "ops/ops_internal.h"
#include "rng.h"

static char cache_dir[512];
static clrun_context *ctx;

/* ---- data -------------------------------------------------------------------------------- */

static float *random_floats(uint64_t n, double lo, double hi, uint64_t *state)
{
    float *x = malloc(n * sizeof *x + 4);
    for (uint64_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * (double)(rng_next(state) >> 11) / 9007199254740992.0);
    return x;
}

/* int64 values as the dtype's elements (i32 or i64), malloc'd. */
static void *as_dtype(const int64_t *values, uint64_t n, clrun_dtype dtype)
{
    if (dtype == CLRUN_I64) {
        int64_t *out = malloc(n * sizeof *out + 8);
        memcpy(out, values, n * sizeof *out);
        return out;
    }
    int32_t *out = malloc(n * sizeof *out + 4);
    for (uint64_t i = 0; i < n; i++)
        out[i] = (int32_t)values[i];
    return out;
}

static void expect_close(const char *what, const float *got, const double *ref,
                         const double *scale, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        if (isnan(ref[i])) {
            if (!isnan(got[i]))
                fail_msg("%s: element %llu is %.9g, expected NaN", what, (unsigned long long)i,
                         got[i]);
            continue;
        }
        double bound = 1e-5 * (fabs(ref[i]) + scale[i]) + 1e-35;
        if (!(fabs((double)got[i] - ref[i]) <= bound))
            fail_msg("%s: element %llu is %.9g, reference %.9g (allowed %.3g)", what,
                     (unsigned long long)i, got[i], ref[i], bound);
    }
}

/* ---- one node through an executor -------------------------------------------------------- */

typedef struct one_node {
    const char *op;
    int inputs;
    clrun_tensor_type types[3];
    const void *data[3];
    clrun_attr attrs[3];
    int attr_count;
} one_node;

/* A graph of the node over graph inputs in0, in1, ..., its output 'out' the graph's. */
static clrun_graph *one_node_graph(const one_node *n, clrun_tensor_type *out_type)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create(n->op, &g), CLRUN_OK);
    clrun_tensor_id in[3], y;
    for (int i = 0; i < n->inputs; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        assert_int_equal(clrun_graph_add_input(g, name, &n->types[i], false, &in[i]), CLRUN_OK);
    }
    const char *names[] = {"out"};
    if (clrun_graph_add_node(g, n->op, in, n->inputs, names, 1, n->attrs, n->attr_count, &y) !=
        CLRUN_OK)
        fail_msg("%s: %s", n->op, clrun_graph_last_error(g));
    assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
    *out_type = *clrun_graph_tensor_type(g, y);
    return g;
}

/* Runs exec once on the node's data; the output into out (its bytes) when the run succeeds. */
static clrun_status run_exec(clrun_exec *exec, const one_node *n, void *out, uint64_t bytes)
{
    clrun_buffer in[3];
    for (int i = 0; i < n->inputs; i++) {
        assert_int_equal(clrun_alloc(ctx, clrun_tensor_bytes(&n->types[i]), &in[i]), CLRUN_OK);
        assert_int_equal(clrun_buffer_write(ctx, &in[i], n->data[i]), CLRUN_OK);
    }
    clrun_status s = clrun_exec_run(exec, in, n->inputs);
    if (s == CLRUN_OK)
        assert_int_equal(clrun_exec_read_output(exec, 0, out, bytes), CLRUN_OK);
    for (int i = 0; i < n->inputs; i++)
        clrun_free(ctx, &in[i]);
    return s;
}

/* The node's output (malloc'd) from one run of a fresh executor, which must succeed. */
static void *run_one(const one_node *n, clrun_tensor_type *out_type)
{
    clrun_graph *g = one_node_graph(n, out_type);
    clrun_exec *exec = NULL;
    if (clrun_exec_create(ctx, g, NULL, &exec) != CLRUN_OK)
        fail_msg("%s: executor: %s", n->op, clrun_last_error(ctx));
    uint64_t bytes = clrun_tensor_bytes(out_type);
    void *out = malloc((size_t)bytes);
    if (run_exec(exec, n, out, bytes) != CLRUN_OK)
        fail_msg("%s: run: %s", n->op, clrun_last_error(ctx));
    clrun_exec_destroy(exec);
    clrun_graph_destroy(g);
    return out;
}

static const clrun__kernel_choice choices[] = {CLRUN__KERNELS_AUTO, CLRUN__KERNELS_TILED,
                                               CLRUN__KERNELS_VECTOR};
static const char *const choice_names[] = {"auto", "group per row", "row per work-item"};

/* ---- softmax_xent, softmax_xent_grad ----------------------------------------------------- */

typedef struct xent_case {
    clrun_tensor_type logits, labels;
    float *x, *dloss;
    int64_t *labels64;
    bool has_ignore;
    int64_t ignore;
} xent_case;

/* Logits of rank 2 to 5 (odd sizes, rows long enough for the vector loops now and then),
 * labels in [0, C), a fifth of them `ignore` when the case has one. */
static xent_case random_xent(uint64_t *state, clrun_dtype label_dtype, int ignore_mode)
{
    xent_case c = {.logits = {CLRUN_F32, 0, {0}}, .labels = {label_dtype, 0, {0}}};
    int lead = (int)rng_range(state, 1, 4);
    for (int d = 0; d < lead; d++)
        c.logits.shape[c.logits.rank++] = c.labels.shape[c.labels.rank++] =
            (int64_t)rng_range(state, 1, 5);
    static const int64_t classes[] = {1, 2, 3, 7, 16, 31, 33, 64, 65, 100, 129, 257};
    int64_t C = classes[rng_next(state) % (sizeof classes / sizeof classes[0])];
    c.logits.shape[c.logits.rank++] = C;
    uint64_t rows = clrun_tensor_elements(&c.labels);
    c.x = random_floats(rows * (uint64_t)C, -6, 6, state);
    c.dloss = random_floats(rows, -2, 2, state);
    c.labels64 = malloc(rows * sizeof *c.labels64);
    c.has_ignore = ignore_mode != 0;
    c.ignore = ignore_mode == 1 ? -100 : 0;
    for (uint64_t r = 0; r < rows; r++) {
        c.labels64[r] = (int64_t)rng_range(state, 0, (uint64_t)C - 1);
        if (c.has_ignore && rng_next(state) % 5 == 0)
            c.labels64[r] = c.ignore;
    }
    return c;
}

static void free_xent(xent_case *c)
{
    free(c->x);
    free(c->dloss);
    free(c->labels64);
}

/* The loss and gradient of the case from the executor: loss[rows], grad[rows * C]. */
static void run_xent(const xent_case *c, float **loss, float **grad)
{
    void *labels = as_dtype(c->labels64, clrun_tensor_elements(&c->labels), c->labels.dtype);
    clrun_tensor_type dloss_type = c->labels;
    dloss_type.dtype = CLRUN_F32;
    one_node n = {.op = "softmax_xent", .inputs = 2, .types = {c->logits, c->labels, dloss_type},
                  .data = {c->x, labels, c->dloss}, .attrs = {attr_int("ignore_index", c->ignore)},
                  .attr_count = c->has_ignore};
    clrun_tensor_type out;
    *loss = run_one(&n, &out);
    assert_true(out.dtype == CLRUN_F32 && out.rank == c->labels.rank);
    n.op = "softmax_xent_grad";
    n.inputs = 3;
    *grad = run_one(&n, &out);
    assert_true(out.rank == c->logits.rank &&
                out.shape[out.rank - 1] == c->logits.shape[out.rank - 1]);
    free(labels);
}

static void softmax_xent_and_its_gradient_match_the_reference(void **state)
{
    (void)state;
    uint64_t rng = 11;
    for (int k = 0; k < 3; k++) {
        clrun__ops_kernels = choices[k];
        for (int round = 0; round < 12; round++) {
            clrun_dtype dtype = round % 2 ? CLRUN_I64 : CLRUN_I32;
            xent_case c = random_xent(&rng, dtype, round % 3);
            uint64_t rows = clrun_tensor_elements(&c.labels);
            int64_t C = c.logits.shape[c.logits.rank - 1];
            float *loss, *grad;
            run_xent(&c, &loss, &grad);
            double *ref = malloc(rows * (uint64_t)C * sizeof *ref);
            double *scale = malloc(rows * (uint64_t)C * sizeof *scale);
            char what[160], shape[CLRUN__TYPE_TEXT];
            snprintf(what, sizeof what, "softmax_xent %s, %s labels, ignore %d (%s)",
                     clrun__type_format(&c.logits, shape, sizeof shape),
                     clrun_dtype_name(dtype), round % 3, choice_names[k]);
            ref_softmax_xent(&c.logits, c.x, c.labels64, c.has_ignore, c.ignore, ref, scale);
            expect_close(what, loss, ref, scale, rows);
            ref_softmax_xent_grad(&c.logits, c.x, c.labels64, c.dloss, c.has_ignore, c.ignore,
                                  ref, scale);
            expect_close(what, grad, ref, scale, rows * (uint64_t)C);
            /* each row of the gradient sums to 0 (softmax sums to 1), within the rounding of
             * C terms; ignored rows are exactly 0 */
            for (uint64_t r = 0; r < rows; r++) {
                double sum = 0;
                for (int64_t j = 0; j < C; j++)
                    sum += grad[r * (uint64_t)C + (uint64_t)j];
                if (!(fabs(sum) <= 2.5e-7 * (double)(C + 4) * fabs(c.dloss[r])))
                    fail_msg("%s: row %llu of the gradient sums to %.3g", what,
                             (unsigned long long)r, sum);
                if (c.has_ignore && c.labels64[r] == c.ignore)
                    assert_true(loss[r] == 0.0f && sum == 0);
            }
            free(ref);
            free(scale);
            free(loss);
            free(grad);
            free_xent(&c);
        }
    }
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
}

/* With dloss 1 the label's gradient is softmax - 1, and the softmax of the label is exp(-loss):
 * the two ops' maxima and sums agree. */
static void the_gradient_agrees_with_the_loss(void **state)
{
    (void)state;
    uint64_t rng = 5;
    for (int k = 0; k < 3; k++) {
        clrun__ops_kernels = choices[k];
        xent_case c = random_xent(&rng, CLRUN_I64, 0);
        uint64_t rows = clrun_tensor_elements(&c.labels);
        int64_t C = c.logits.shape[c.logits.rank - 1];
        for (uint64_t r = 0; r < rows; r++)
            c.dloss[r] = 1;
        float *loss, *grad;
        run_xent(&c, &loss, &grad);
        for (uint64_t r = 0; r < rows; r++) {
            double p = (double)grad[r * (uint64_t)C + (uint64_t)c.labels64[r]] + 1;
            double q = exp(-(double)loss[r]);
            if (!(fabs(p - q) <= 2e-6 * (1 + (double)C / 16) + 1e-5 * q * fabs((double)loss[r])))
                fail_msg("%s, row %llu: softmax of the label %.9g from the gradient, %.9g from "
                         "the loss %.9g", choice_names[k], (unsigned long long)r, p, q, loss[r]);
        }
        free(loss);
        free(grad);
        free_xent(&c);
    }
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
}

/* Logits of magnitude 1e4: the maximum is subtracted first, so nothing overflows. */
static void large_logits_give_finite_losses(void **state)
{
    (void)state;
    uint64_t rng = 3;
    for (int k = 0; k < 3; k++) {
        clrun__ops_kernels = choices[k];
        for (int spread = 0; spread < 2; spread++) {
            xent_case c = random_xent(&rng, CLRUN_I32, 0);
            uint64_t rows = clrun_tensor_elements(&c.labels);
            int64_t C = c.logits.shape[c.logits.rank - 1];
            for (uint64_t i = 0; i < rows * (uint64_t)C; i++)
                c.x[i] = spread ? c.x[i] * 1666.0f : 1e4f + c.x[i]; /* +-1e4, or near 1e4 */
            float *loss, *grad;
            run_xent(&c, &loss, &grad);
            double *ref = malloc(rows * (uint64_t)C * sizeof *ref);
            double *scale = malloc(rows * (uint64_t)C * sizeof *scale);
            ref_softmax_xent(&c.logits, c.x, c.labels64, false, 0, ref, scale);
            for (uint64_t r = 0; r < rows; r++)
                assert_true(isfinite(loss[r]) && loss[r] >= 0);
            expect_close("softmax_xent of large logits", loss, ref, scale, rows);
            ref_softmax_xent_grad(&c.logits, c.x, c.labels64, c.dloss, false, 0, ref, scale);
            expect_close("softmax_xent_grad of large logits", grad, ref, scale, rows * (uint64_t)C);
            free(ref);
            free(scale);
            free(loss);
            free(grad);
            free_xent(&c);
        }
    }
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
}

/* A label outside [0, C) fails the executor's run, naming the node, the label and its position
 * (the first bad one), in every mode; the next run with good labels is correct. */
static void a_label_outside_its_classes_fails_the_run_and_names_it(void **state)
{
    (void)state;
    enum { A = 3, B = 4, C = 5 };
    uint64_t rng = 17;
    float *x = random_floats(A * B * C, -2, 2, &rng), dloss[A * B];
    for (int r = 0; r < A * B; r++)
        dloss[r] = 1;
    int64_t bad[A * B], good[A * B];
    for (int r = 0; r < A * B; r++)
        bad[r] = good[r] = r % C;
    bad[0] = good[0] = -1; /* ignored: not an error */
    bad[5] = 7;            /* [1, 1]: the first bad one */
    bad[9] = -3;
    const clrun_exec_mode modes[] = {CLRUN_EXEC_POOLED, CLRUN_EXEC_NAIVE, CLRUN_EXEC_PLANNED};
    for (int grad = 0; grad < 2; grad++)
        for (int wide = 0; wide < 2; wide++)
            for (int m = 0; m < 3; m++) {
                clrun_dtype dtype = wide ? CLRUN_I64 : CLRUN_I32;
                void *bad_labels = as_dtype(bad, A * B, dtype);
                void *good_labels = as_dtype(good, A * B, dtype);
                one_node n = {.op = grad ? "softmax_xent_grad" : "softmax_xent",
                              .inputs = grad ? 3 : 2,
                              .types = {shape_type(CLRUN_F32, "3,4,5"), shape_type(dtype, "3,4"),
                                        shape_type(CLRUN_F32, "3,4")},
                              .data = {x, bad_labels, dloss},
                              .attrs = {attr_int("ignore_index", -1)}, .attr_count = 1};
                clrun_tensor_type out_type;
                clrun_graph *g = one_node_graph(&n, &out_type);
                clrun_exec_options eo;
                clrun_exec_options_init(&eo);
                eo.mode = modes[m];
                clrun_exec *exec = NULL;
                assert_int_equal(clrun_exec_create(ctx, g, &eo, &exec), CLRUN_OK);
                uint64_t bytes = clrun_tensor_bytes(&out_type);
                float *out = malloc((size_t)bytes);
                assert_int_equal(run_exec(exec, &n, out, bytes), CLRUN_ERROR_INVALID_ARGUMENT);
                const char *msg = clrun_last_error(ctx);
                char node[64];
                snprintf(node, sizeof node, "'out' (%s)", n.op);
                if (!strstr(msg, node) || !strstr(msg, "label 7 at position 5 [1, 1]") ||
                    !strstr(msg, "5 classes") || !strstr(msg, "ignore_index -1"))
                    fail_msg("%s, %s labels, mode %d: message '%s'", n.op,
                             clrun_dtype_name(dtype), m, msg);
                assert_int_equal(clrun_exec_read_output(exec, 0, out, bytes),
                                 CLRUN_ERROR_INVALID_ARGUMENT);
                /* the executor forgot the bad label: the next run is correct */
                n.data[1] = good_labels;
                assert_int_equal(run_exec(exec, &n, out, bytes), CLRUN_OK);
                double ref[A * B * C], scale[A * B * C];
                if (grad)
                    ref_softmax_xent_grad(&n.types[0], x, good, dloss, true, -1, ref, scale);
                else
                    ref_softmax_xent(&n.types[0], x, good, true, -1, ref, scale);
                expect_close(n.op, out, ref, scale, bytes / 4);
                free(out);
                free(bad_labels);
                free(good_labels);
                clrun_exec_destroy(exec);
                clrun_graph_destroy(g);
            }
    free(x);
    clrun_memory_stats ms;
    assert_int_equal(clrun_memory_stats_get(ctx, &ms), CLRUN_OK);
    assert_int_equal(ms.in_use, 0); /* the failed runs held nothing back */
}

/* Outside an executor the op gives NaN where a label is bad, and its check (which the executor
 * calls after a run) reports the first one once. */
static void the_op_alone_gives_nan_for_a_bad_label(void **state)
{
    (void)state;
    enum { ROWS = 6, C = 9 };
    uint64_t rng = 23;
    float *x = random_floats(ROWS * C, -3, 3, &rng), dloss[ROWS] = {1, 1, 1, 1, 1, 1};
    const int64_t labels[ROWS] = {0, 9, 8, -100, -1, 4};
    for (int k = 0; k < 3; k++)
        for (int grad = 0; grad < 2; grad++) {
            clrun__ops_kernels = choices[k];
            const clrun__op *op = clrun__op_find(grad ? "softmax_xent_grad" : "softmax_xent");
            const clrun__op_kernels *kernels = clrun__op_kernels_find(op);
            assert_non_null(kernels);
            assert_non_null(kernels->check);
            clrun_tensor_type in[3] = {shape_type(CLRUN_F32, "6,9"), shape_type(CLRUN_I64, "6"),
                                       shape_type(CLRUN_F32, "6")};
            clrun_tensor_type out = grad ? in[0] : in[2];
            clrun_attr attrs[1] = {attr_int("ignore_index", -100)};
            clrun__op_call call = {in, grad ? 3 : 2, &out, 1, attrs, 1, 0};
            void *st = NULL;
            if (kernels->prepare(ctx, op, &call, &st) != CLRUN_OK)
                fail_msg("%s prepare: %s", op->name, clrun_last_error(ctx));
            const void *data[3] = {x, labels, dloss};
            cl_mem buf[3], y;
            cl_int e;
            for (int i = 0; i < call.input_count; i++) {
                buf[i] = clCreateBuffer(clrun_context_cl(ctx),
                                        CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                        (size_t)clrun_tensor_bytes(&in[i]), (void *)data[i], &e);
                assert_int_equal(e, CL_SUCCESS);
            }
            size_t bytes = (size_t)clrun_tensor_bytes(&out);
            y = clCreateBuffer(clrun_context_cl(ctx), CL_MEM_READ_WRITE, bytes, NULL, &e);
            assert_int_equal(e, CL_SUCCESS);
            float result[ROWS * C];
            assert_int_equal(kernels->enqueue(ctx, st, &call, buf, &y, 0, NULL, NULL), CLRUN_OK);
            assert_int_equal(clEnqueueReadBuffer(clrun_context_queue(ctx), y, CL_TRUE, 0, bytes,
                                                 result, 0, NULL, NULL), CL_SUCCESS);
            int width = grad ? C : 1;
            for (int r = 0; r < ROWS; r++)
                for (int j = 0; j < width; j++) {
                    float v = result[r * width + j];
                    bool bad_row = r == 1 || r == 4;
                    if (bad_row ? !isnan(v) : !isfinite(v))
                        fail_msg("%s (%s): row %d element %d is %g", op->name, choice_names[k], r,
                                 j, v);
                    if (r == 3)
                        assert_true(v == 0.0f);
                }
            assert_int_equal(kernels->check(ctx, st, "alone"), CLRUN_ERROR_INVALID_ARGUMENT);
            if (!strstr(clrun_last_error(ctx), "label 9 at position 1 [1]"))
                fail_msg("message '%s'", clrun_last_error(ctx));
            assert_int_equal(kernels->check(ctx, st, "alone"), CLRUN_OK); /* forgotten */
            kernels->release(st);
            for (int i = 0; i < call.input_count; i++)
                clReleaseMemObject(buf[i]);
            clReleaseMemObject(y);
        }
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
    free(x);
}

/* ---- gather_grad ------------------------------------------------------------------------- */

/* Random cases of both forms: indices of rank 0 to 3 with values reaching past both ends of
 * the axis (duplicates likely), i32 and i64, against the reference. */
static void gather_grad_matches_the_reference(void **state)
{
    (void)state;
    uint64_t rng = 29;
    for (int round = 0; round < 40; round++) {
        bool with_axis = round % 2 == 1;
        clrun_dtype dtype = round % 4 < 2 ? CLRUN_I32 : CLRUN_I64;
        clrun_tensor_type idx = {dtype, (int)rng_range(&rng, 0, with_axis ? 2 : 3), {0}};
        for (int d = 0; d < idx.rank; d++)
            idx.shape[d] = (int64_t)rng_range(&rng, 1, 4);
        /* the data: [V, D], or [A..., size, B...] */
        clrun_tensor_type data = {CLRUN_F32, with_axis ? (int)rng_range(&rng, 1, 4) : 2, {0}};
        for (int d = 0; d < data.rank; d++)
            data.shape[d] = (int64_t)rng_range(&rng, 1, 5);
        int axis = with_axis ? (int)rng_range(&rng, 0, (uint64_t)data.rank - 1) : 0;
        data.shape[axis] = (int64_t)rng_range(&rng, 1, 9);
        if (!with_axis)
            data.shape[1] = (int64_t)rng_range(&rng, 1, 40);
        int64_t size = data.shape[axis];
        clrun_tensor_type dy = {CLRUN_F32, 0, {0}};
        for (int d = 0; d < axis; d++)
            dy.shape[dy.rank++] = data.shape[d];
        for (int d = 0; d < idx.rank; d++)
            dy.shape[dy.rank++] = idx.shape[d];
        for (int d = axis + 1; d < data.rank; d++)
            dy.shape[dy.rank++] = data.shape[d];
        uint64_t count = clrun_tensor_elements(&idx);
        int64_t *values = malloc(count * sizeof *values);
        for (uint64_t j = 0; j < count; j++)
            values[j] = (int64_t)rng_range(&rng, 0, (uint64_t)(2 * size + 4)) - size - 2;
        void *indices = as_dtype(values, count, dtype);
        float *g = random_floats(clrun_tensor_elements(&dy), -1, 1, &rng);
        /* negative axes too */
        int64_t given = round % 3 == 0 ? axis - data.rank : axis;
        one_node n = {.op = "gather_grad", .inputs = 2, .types = {idx, dy}, .data = {indices, g},
                      .attrs = {attr_int("size", size), attr_int("axis", given)},
                      .attr_count = with_axis ? 2 : 1};
        clrun_tensor_type out;
        float *got = run_one(&n, &out);
        assert_int_equal(out.rank, data.rank);
        for (int d = 0; d < data.rank; d++)
            assert_int_equal(out.shape[d], data.shape[d]);
        uint64_t total = clrun_tensor_elements(&out);
        double *ref = malloc(total * sizeof *ref), *scale = malloc(total * sizeof *scale);
        ref_gather_grad(&idx, values, &dy, g, with_axis, axis, &out, ref, scale);
        char what[256], si[CLRUN__TYPE_TEXT], sd[CLRUN__TYPE_TEXT];
        snprintf(what, sizeof what, "gather_grad indices %s, dy %s, size %lld, %s %lld",
                 clrun__type_format(&idx, si, sizeof si), clrun__type_format(&dy, sd, sizeof sd),
                 (long long)size, with_axis ? "axis" : "no axis", (long long)given);
        expect_close(what, got, ref, scale, total);
        free(ref);
        free(scale);
        free(got);
        free(g);
        free(indices);
        free(values);
    }
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* An embedding's gradient, V = 30000, D = 256, 2048 indices: right, and fast (the run is timed:
 * well under 100 ms on POCL; the bound leaves room for a loaded machine). */
static void gather_grad_of_an_embedding_is_right_and_fast_at_scale(void **state)
{
    (void)state;
    enum { V = 30000, D = 256, N = 2048 };
    uint64_t rng = 31;
    int32_t *idx = malloc(N * sizeof *idx);
    for (int j = 0; j < N; j++)
        idx[j] = (int32_t)rng_range(&rng, 0, j % 7 == 0 ? 40 : V - 1); /* duplicates too */
    idx[3] = V; /* outside: adds nothing */
    float *g = random_floats((uint64_t)N * D, -1, 1, &rng);
    one_node n = {.op = "gather_grad", .inputs = 2,
                  .types = {shape_type(CLRUN_I32, "2048"), shape_type(CLRUN_F32, "2048,256")},
                  .data = {idx, g}, .attrs = {attr_int("size", V)}, .attr_count = 1};
    clrun_tensor_type out_type;
    clrun_graph *graph = one_node_graph(&n, &out_type);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, graph, NULL, &exec), CLRUN_OK);
    clrun_buffer in[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(clrun_alloc(ctx, clrun_tensor_bytes(&n.types[i]), &in[i]), CLRUN_OK);
        assert_int_equal(clrun_buffer_write(ctx, &in[i], n.data[i]), CLRUN_OK);
    }
    double best = 1e9;
    for (int run = 0; run < 4; run++) {
        double start = seconds();
        assert_int_equal(clrun_exec_run(exec, in, 2), CLRUN_OK);
        double t = seconds() - start;
        if (run > 0 && t < best) /* the first run builds the kernels */
            best = t;
    }
    print_message("gather_grad [%d, %d] from %d indices: %.1f ms\n", V, D, N, best * 1e3);
    assert_true(best < 0.5);
    float *got = malloc((size_t)V * D * sizeof *got);
    assert_int_equal(clrun_exec_read_output(exec, 0, got, (uint64_t)V * D * sizeof *got), CLRUN_OK);
    /* each row against the sum of its dy rows, in double, found through a list per row */
    int *head = malloc(V * sizeof *head), next[N];
    for (int v = 0; v < V; v++)
        head[v] = -1;
    for (int j = N; j-- > 0;)
        if (idx[j] >= 0 && idx[j] < V) {
            next[j] = head[idx[j]];
            head[idx[j]] = j;
        }
    for (int v = 0; v < V; v++)
        for (int k = 0; k < D; k++) {
            double sum = 0, s = 0;
            for (int j = head[v]; j >= 0; j = next[j]) {
                sum += g[(size_t)j * D + k];
                s += fabs(g[(size_t)j * D + k]);
            }
            float d = got[(size_t)v * D + k];
            if (!(fabs(d - sum) <= 1e-5 * (fabs(sum) + s)))
                fail_msg("row %d column %d is %.9g, reference %.9g", v, k, d, sum);
        }
    free(head);
    free(got);
    for (int i = 0; i < 2; i++)
        clrun_free(ctx, &in[i]);
    clrun_exec_destroy(exec);
    clrun_graph_destroy(graph);
    free(idx);
    free(g);
}

/* ---- dropout ----------------------------------------------------------------------------- */

/* The host's hash is splitmix64 as tests/rng.h draws it: the state seed + golden * stream + i
 * advanced once. And the threshold and scale by their definitions. */
static void the_host_mask_is_the_documented_generator(void **state)
{
    (void)state;
    const uint64_t seeds[] = {0, 1, 42, UINT64_MAX, UINT64_C(0x8000000000000000)};
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++)
        for (int64_t stream = 0; stream < 4; stream++)
            for (uint64_t i = 0; i < 1000; i += 7) {
                uint64_t st = seeds[s] + UINT64_C(0x9E3779B97F4A7C15) * (uint64_t)stream + i;
                assert_true(clrun__dropout_hash(seeds[s], stream, i) == rng_next(&st));
            }
    assert_true(clrun__dropout_threshold(0) == 0);
    assert_true(clrun__dropout_threshold(0.5) == UINT32_C(0x80000000));
    assert_true(clrun__dropout_threshold(0.25) == UINT32_C(0x40000000));
    assert_true(clrun__dropout_threshold(0.1) == UINT32_C(429496729)); /* floor(429496729.6) */
    assert_true(clrun__dropout_threshold(1 - 0x1p-53) == UINT32_MAX);
    assert_true(clrun__dropout_scale(0.5) == 2.0f);
    assert_true(clrun__dropout_scale(0.1) == (float)(1.0 / 0.9));
    assert_true(clrun__dropout_scale(0) == 1.0f);
    /* p = 0 keeps everything */
    for (uint64_t i = 0; i < 1000; i++)
        assert_true(clrun__dropout_keep(7, 0, i, 0));
}

/* dropout(x) with seed and the attributes; seed_rank 0 or 1. */
static float *run_dropout(const float *x, uint64_t n, int64_t seed, int seed_rank, double ratio,
                          int64_t stream)
{
    clrun_tensor_type xt = {CLRUN_F32, 1, {(int64_t)n}}, st = {CLRUN_I64, seed_rank, {1}};
    one_node node = {.op = "dropout", .inputs = 2, .types = {xt, st}, .data = {x, &seed},
                     .attrs = {attr_float("ratio", ratio), attr_int("stream", stream)},
                     .attr_count = 2};
    clrun_tensor_type out;
    float *y = run_one(&node, &out);
    assert_true(out.dtype == CLRUN_F32 && out.rank == 1 && out.shape[0] == (int64_t)n);
    return y;
}

/* Every element bit for bit: x * (float)(1 / (1 - p)) where clrun__dropout_keep keeps it, else
 * 0; the kept fraction within 3 sigma of 1 - p over 1e5 elements. */
static void dropout_agrees_with_the_host_mask_bit_for_bit_at_scale(void **state)
{
    (void)state;
    enum { N = 100000 };
    uint64_t rng = 37;
    float *x = random_floats(N, -4, 4, &rng);
    const double ratios[] = {0, 0.1, 0.5, 0.9, 0.999};
    const int64_t seeds[] = {0, 12345, -1, INT64_MIN};
    for (size_t r = 0; r < sizeof ratios / sizeof ratios[0]; r++)
        for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
            double p = ratios[r];
            int64_t stream = (int64_t)(s % 3);
            float *y = run_dropout(x, N, seeds[s], (int)(s % 2), p, stream);
            float scale = clrun__dropout_scale(p);
            uint64_t kept = 0;
            for (uint64_t i = 0; i < N; i++) {
                bool keep = clrun__dropout_keep((uint64_t)seeds[s], stream, i, p);
                float want = keep ? x[i] * scale : 0.0f;
                kept += keep;
                if (memcmp(&want, &y[i], sizeof want) != 0)
                    fail_msg("ratio %g, seed %lld, stream %lld: element %llu is %.9g, expected "
                             "%.9g", p, (long long)seeds[s], (long long)stream,
                             (unsigned long long)i, y[i], want);
            }
            double mean = N * (1 - p), sigma = sqrt(N * p * (1 - p));
            if (!(fabs((double)kept - mean) <= 3 * sigma))
                fail_msg("ratio %g, seed %lld: kept %llu of %d (expected %.0f +- %.0f)", p,
                         (long long)seeds[s], (unsigned long long)kept, N, mean, 3 * sigma);
            free(y);
        }
    free(x);
}

static uint64_t mask_differences(const float *a, const float *b, uint64_t n)
{
    uint64_t d = 0;
    for (uint64_t i = 0; i < n; i++)
        d += (a[i] == 0.0f) != (b[i] == 0.0f);
    return d;
}

/* The same seed and stream give the same mask (run after run, and for dy as for x: dropout is
 * its own gradient); another seed or another stream another one. */
static void dropout_masks_follow_the_seed_and_the_stream(void **state)
{
    (void)state;
    enum { N = 4099 };
    uint64_t rng = 41;
    float *x = random_floats(N, 0.5, 1.5, &rng), *dy = random_floats(N, -2, -0.25, &rng);
    float *a = run_dropout(x, N, 99, 0, 0.3, 2);
    float *b = run_dropout(x, N, 99, 1, 0.3, 2);
    assert_memory_equal(a, b, N * sizeof *a);
    float *gradient = run_dropout(dy, N, 99, 0, 0.3, 2);
    assert_int_equal(mask_differences(a, gradient, N), 0);
    for (uint64_t i = 0; i < N; i++)
        assert_true(gradient[i] == 0.0f || gradient[i] == dy[i] * clrun__dropout_scale(0.3));
    float *other_seed = run_dropout(x, N, 100, 0, 0.3, 2);
    float *other_stream = run_dropout(x, N, 99, 0, 0.3, 3);
    /* independent masks differ in about 2 p (1 - p) of the elements: 42% */
    assert_true(mask_differences(a, other_seed, N) > N / 4);
    assert_true(mask_differences(a, other_stream, N) > N / 4);
    free(a);
    free(b);
    free(gradient);
    free(other_seed);
    free(other_stream);
    free(x);
    free(dy);
}

/* A dropout of constants is folded at creation into the values it computes (a pure function of
 * its inputs): the same bits as an unfolded run and as the host's mask. */
static void a_dropout_of_constants_folds_to_the_same_bits(void **state)
{
    (void)state;
    enum { N = 1000 };
    uint64_t rng = 43;
    float *x = random_floats(N, -1, 1, &rng);
    const int64_t seed = 2024;
    float results[2][N];
    for (int fold = 0; fold < 2; fold++) {
        clrun_graph *g = NULL;
        assert_int_equal(clrun_graph_create("dropout_constants", &g), CLRUN_OK);
        clrun_tensor_type xt = {CLRUN_F32, 1, {N}}, st = {CLRUN_I64, 0, {0}};
        clrun_tensor_id in[2], y, z, bias;
        assert_int_equal(
            clrun_graph_add_constant(g, "x", &xt, x, CLRUN_FILL_ZEROS, 0, 0, 0, &in[0]), CLRUN_OK);
        assert_int_equal(clrun_graph_add_constant(g, "seed", &st, &seed, CLRUN_FILL_ZEROS, 0, 0, 0,
                                                  &in[1]), CLRUN_OK);
        assert_int_equal(clrun_graph_add_input(g, "bias", &xt, false, &bias), CLRUN_OK);
        const char *yn[] = {"dropped"}, *zn[] = {"z"};
        clrun_attr attrs[2] = {attr_float("ratio", 0.25), attr_int("stream", 1)};
        assert_int_equal(clrun_graph_add_node(g, "dropout", in, 2, yn, 1, attrs, 2, &y), CLRUN_OK);
        clrun_tensor_id yb[2] = {y, bias};
        assert_int_equal(clrun_graph_add_node(g, "add", yb, 2, zn, 1, NULL, 0, &z), CLRUN_OK);
        assert_int_equal(clrun_graph_mark_output(g, z), CLRUN_OK);
        clrun_exec_options eo;
        clrun_exec_options_init(&eo);
        eo.fold = fold ? 1 : -1;
        clrun_exec *exec = NULL;
        assert_int_equal(clrun_exec_create(ctx, g, &eo, &exec), CLRUN_OK);
        clrun_exec_stats stats;
        assert_int_equal(clrun_exec_stats_get(exec, &stats), CLRUN_OK);
        assert_int_equal(stats.folded_nodes, fold);
        float zeros[N] = {0};
        clrun_buffer b;
        assert_int_equal(clrun_alloc(ctx, sizeof zeros, &b), CLRUN_OK);
        assert_int_equal(clrun_buffer_write(ctx, &b, zeros), CLRUN_OK);
        assert_int_equal(clrun_exec_run(exec, &b, 1), CLRUN_OK);
        assert_int_equal(clrun_exec_read_output(exec, 0, results[fold], sizeof results[fold]),
                         CLRUN_OK);
        clrun_free(ctx, &b);
        clrun_exec_destroy(exec);
        clrun_graph_destroy(g);
    }
    assert_memory_equal(results[0], results[1], sizeof results[0]);
    for (uint64_t i = 0; i < N; i++) {
        bool keep = clrun__dropout_keep((uint64_t)seed, 1, i, 0.25);
        float want = keep ? x[i] * clrun__dropout_scale(0.25) : 0.0f;
        assert_true(results[1][i] == want);
    }
    free(x);
}

/* ---- type rules -------------------------------------------------------------------------- */

static void expect_refusal(const char *op_name, int inputs, const clrun_tensor_type *types,
                           const clrun_attr *attrs, int attr_count, const char *want)
{
    const clrun__op *op = clrun__op_find(op_name);
    assert_non_null(op);
    clrun_tensor_type out[1];
    clrun__op_call call = {types, inputs, out, 1, attrs, attr_count, 0};
    char err[512] = "";
    if (op->infer(&call, out, err, sizeof err) == CLRUN_OK)
        fail_msg("%s: accepted what it should refuse ('%s')", op_name, want);
    if (strcmp(err, want) != 0)
        fail_msg("%s: refusal '%s', expected '%s'", op_name, err, want);
}

static void the_type_rules_refuse_what_they_cannot_run(void **state)
{
    (void)state;
    const clrun_tensor_type f2_5 = shape_type(CLRUN_F32, "2,5"), i2 = shape_type(CLRUN_I32, "2"),
                            f2 = shape_type(CLRUN_F32, "2");
    clrun_tensor_type t[3];
    clrun_attr a[2];

    t[0] = shape_type(CLRUN_F32, "5"), t[1] = shape_type(CLRUN_I32, "");
    expect_refusal("softmax_xent", 2, t, NULL, 0,
                   "softmax_xent: logits are f32[5]: expected [..., C], at least 2 dimensions");
    t[0] = f2_5, t[1] = f2;
    expect_refusal("softmax_xent", 2, t, NULL, 0,
                   "softmax_xent: labels are f32[2]: expected i32 or i64");
    t[1] = shape_type(CLRUN_I64, "5");
    expect_refusal("softmax_xent", 2, t, NULL, 0,
                   "softmax_xent: labels i64[5] do not fit logits f32[2, 5]: expected logits' "
                   "dims but the last");
    t[0] = shape_type(CLRUN_F16, "2,5"), t[1] = i2;
    expect_refusal("softmax_xent", 2, t, NULL, 0,
                   "softmax_xent: input 0 is f16[2, 5]: f16 kernels do not exist yet");
    t[0] = f2_5, t[1] = i2;
    a[0] = attr_float("ignore_index", 1.5);
    expect_refusal("softmax_xent", 2, t, a, 1,
                   "softmax_xent: attribute 'ignore_index' must be an integer");
    t[2] = shape_type(CLRUN_F32, "2,1");
    expect_refusal("softmax_xent_grad", 3, t, NULL, 0,
                   "softmax_xent_grad: dloss f32[2, 1] does not fit labels i32[2]: expected the "
                   "same shape");
    t[2] = shape_type(CLRUN_I32, "2");
    expect_refusal("softmax_xent_grad", 3, t, NULL, 0,
                   "softmax_xent_grad: input 2 is i32[2]: expected f32");
    expect_refusal("softmax_xent_grad", 2, t, NULL, 0,
                   "softmax_xent_grad: takes 3 inputs, got 2");

    t[0] = shape_type(CLRUN_I64, "3"), t[1] = shape_type(CLRUN_F32, "3,4");
    expect_refusal("gather_grad", 2, t, NULL, 0,
                   "gather_grad: missing required attribute 'size'");
    a[0] = attr_int("size", 0);
    expect_refusal("gather_grad", 2, t, a, 1,
                   "gather_grad: attribute 'size' is 0: must be at least 1");
    a[0] = attr_int("size", 10);
    t[1] = shape_type(CLRUN_F32, "4,4");
    expect_refusal("gather_grad", 2, t, a, 1,
                   "gather_grad: dy f32[4, 4] does not fit indices i64[3]: expected "
                   "[indices..., D]");
    t[0] = shape_type(CLRUN_F32, "3"), t[1] = shape_type(CLRUN_F32, "3,4");
    expect_refusal("gather_grad", 2, t, a, 1,
                   "gather_grad: indices are f32[3]: expected i32 or i64");
    t[0] = shape_type(CLRUN_I32, "3"), t[1] = shape_type(CLRUN_I32, "3,4");
    expect_refusal("gather_grad", 2, t, a, 1, "gather_grad: input 1 is i32[3, 4]: expected f32");
    t[1] = shape_type(CLRUN_F32, "2,3,4");
    a[1] = attr_int("axis", 2);
    expect_refusal("gather_grad", 2, t, a, 2,
                   "gather_grad: dy f32[2, 3, 4] does not fit indices i32[3] on axis 2: expected "
                   "[A..., indices..., B...] with 2 dims before them");
    a[1] = attr_int("axis", -4);
    expect_refusal("gather_grad", 2, t, a, 2,
                   "gather_grad: axis -4 is out of range for data of rank 3 (dy f32[2, 3, 4], "
                   "indices i32[3])");

    t[0] = shape_type(CLRUN_F32, "4"), t[1] = shape_type(CLRUN_I32, "");
    expect_refusal("dropout", 2, t, NULL, 0, "dropout: seed is i32[]: expected i64[] or i64[1]");
    t[1] = shape_type(CLRUN_I64, "2");
    expect_refusal("dropout", 2, t, NULL, 0, "dropout: seed is i64[2]: expected i64[] or i64[1]");
    t[1] = shape_type(CLRUN_I64, "1");
    a[0] = attr_float("ratio", 1);
    expect_refusal("dropout", 2, t, a, 1, "dropout: attribute 'ratio' is 1: must be in [0, 1)");
    a[0] = attr_float("ratio", -0.1);
    expect_refusal("dropout", 2, t, a, 1, "dropout: attribute 'ratio' is -0.1: must be in [0, 1)");
    a[0] = attr_int("stream", -1);
    expect_refusal("dropout", 2, t, a, 1, "dropout: attribute 'stream' is -1: must be >= 0");
    t[0] = shape_type(CLRUN_I32, "4");
    expect_refusal("dropout", 2, t, NULL, 0, "dropout: input 0 is i32[4]: expected f32");
}

/* ---- main -------------------------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    if (clrun_context_create(NULL, &ctx) != CLRUN_OK) {
        fprintf(stderr, "no context: %s\n", clrun_last_error(NULL));
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    clrun_context_destroy(ctx);
    return 0;
}

int main(void)
{
    clrun_test_device_environment(cache_dir, sizeof cache_dir);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(softmax_xent_and_its_gradient_match_the_reference),
        cmocka_unit_test(the_gradient_agrees_with_the_loss),
        cmocka_unit_test(large_logits_give_finite_losses),
        cmocka_unit_test(a_label_outside_its_classes_fails_the_run_and_names_it),
        cmocka_unit_test(the_op_alone_gives_nan_for_a_bad_label),
        cmocka_unit_test(gather_grad_matches_the_reference),
        cmocka_unit_test(gather_grad_of_an_embedding_is_right_and_fast_at_scale),
        cmocka_unit_test(the_host_mask_is_the_documented_generator),
        cmocka_unit_test(dropout_agrees_with_the_host_mask_bit_for_bit_at_scale),
        cmocka_unit_test(dropout_masks_follow_the_seed_and_the_stream),
        cmocka_unit_test(a_dropout_of_constants_folds_to_the_same_bits),
        cmocka_unit_test(the_type_rules_refuse_what_they_cannot_run),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    clrun_test_remove_dir(cache_dir);
    return failed;
}
