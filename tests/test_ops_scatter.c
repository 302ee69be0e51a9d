/* The scatter ops and index tuples on a real device (POCL in CI), through the graph API and an
 * executor: scatter_elements and scatter_nd in every element size and, with the reductions add
 * and mul, every arithmetic dtype, duplicates included (the result must be the reference's,
 * which applies updates in index order, bit for bit); gather_nd with and without batch dims;
 * top_k_indices with ties and NaN; an index outside the data failing the run by name; and the
 * type rules' refusals. References: tests/op_reference.c. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <clrun/clrun.h>

#include "device/context.h"
#include "device_test.h"
#include "op_args.h"
#include "op_reference.h"
#include "rng.h"

static char cache_dir[512];
static clrun_context *ctx;

static const clrun_dtype every_dtype[] = {CLRUN_F32, CLRUN_F64, CLRUN_F16, CLRUN_I32,
                                          CLRUN_I64, CLRUN_BOOL, CLRUN_U8,  CLRUN_I16};

/* ---- data -------------------------------------------------------------------------------- */

static const char *dtype_name(clrun_dtype t) { return clrun_dtype_name(t); }

/* n random elements of the dtype (malloc'd): for `small`, values the reductions keep exact
 * enough to compare bit for bit after many steps (floats in [0.5, 1.5], any integer); else any
 * bits of a valid element (bools 0 or 1). */
static void *random_elements(clrun_dtype t, uint64_t n, bool small, uint64_t *state)
{
    uint64_t bytes = n * clrun_dtype_size(t);
    unsigned char *x = malloc((size_t)bytes + 8);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t r = rng_next(state);
        double u = 0.5 + (double)(r >> 11) / 9007199254740992.0;
        if (t == CLRUN_F32) {
            float f = small ? (float)u : (float)((double)(int64_t)r / 1e15);
            memcpy(x + 4 * i, &f, 4);
        } else if (t == CLRUN_F64) {
            double d = small ? u : (double)(int64_t)r / 1e15;
            memcpy(x + 8 * i, &d, 8);
        } else if (t == CLRUN_BOOL) {
            x[i] = (unsigned char)(r & 1);
        } else {
            memcpy(x + clrun_dtype_size(t) * i, &r, clrun_dtype_size(t));
        }
    }
    return x;
}

/* n random indices in [-dim, dim) */
static int64_t *random_indices(uint64_t n, int64_t dim, uint64_t *state)
{
    int64_t *idx = malloc(n * sizeof *idx + 8);
    for (uint64_t i = 0; i < n; i++)
        idx[i] = (int64_t)rng_range(state, 0, (uint64_t)(2 * dim - 1)) - dim;
    return idx;
}

/* int64 indices as the index dtype's elements (malloc'd). */
static void *as_index_dtype(const int64_t *values, uint64_t n, clrun_dtype dtype)
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

/* ---- one node through an executor -------------------------------------------------------- */

typedef struct one_node {
    const char *op;
    int inputs;
    clrun_tensor_type types[3];
    const void *data[3];
    clrun_attr attrs[3];
    int attr_count;
} one_node;

/* Runs the node once, its inputs graph inputs; the output into *out (malloc'd) and its type
 * into *out_type. Returns the run's status (the graph and executor must build). */
static clrun_status run_node(const one_node *n, void **out, clrun_tensor_type *out_type)
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
    if (clrun_graph_add_node(g, n->op, in, n->inputs, names, 1, n->attrs, n->attr_count, &y) != CLRUN_OK)
        fail_msg("%s: %s", n->op, clrun_graph_last_error(g));
    assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
    *out_type = *clrun_graph_tensor_type(g, y);
    clrun_exec *exec = NULL;
    if (clrun_exec_create(ctx, g, NULL, &exec) != CLRUN_OK)
        fail_msg("%s: executor: %s", n->op, clrun_last_error(ctx));
    clrun_buffer bufs[3];
    for (int i = 0; i < n->inputs; i++) {
        assert_int_equal(clrun_alloc(ctx, clrun_tensor_bytes(&n->types[i]), &bufs[i]), CLRUN_OK);
        assert_int_equal(clrun_buffer_write(ctx, &bufs[i], n->data[i]), CLRUN_OK);
    }
    uint64_t bytes = clrun_tensor_bytes(out_type);
    *out = malloc((size_t)bytes);
    clrun_status s = clrun_exec_run(exec, bufs, n->inputs);
    if (s == CLRUN_OK)
        assert_int_equal(clrun_exec_read_output(exec, 0, *out, bytes), CLRUN_OK);
    for (int i = 0; i < n->inputs; i++)
        clrun_free(ctx, &bufs[i]);
    clrun_exec_destroy(exec);
    clrun_graph_destroy(g);
    return s;
}

static void expect_bytes(const char *what, const void *got, const void *want,
                         const clrun_tensor_type *t)
{
    size_t size = clrun_dtype_size(t->dtype);
    for (uint64_t i = 0; i < ref_elements(t); i++)
        if (memcmp((const char *)got + i * size, (const char *)want + i * size, size) != 0) {
            uint64_t g = 0, w = 0;
            memcpy(&g, (const char *)got + i * size, size);
            memcpy(&w, (const char *)want + i * size, size);
            fail_msg("%s: element %llu has bits 0x%llx, the reference 0x%llx", what,
                     (unsigned long long)i, (unsigned long long)g, (unsigned long long)w);
        }
}

static bool device_has_fp64(void)
{
    return ctx->info.fp64;
}

/* ---- scatter_elements -------------------------------------------------------------------- */

/* One scatter_elements over data [4, 5, 3] on `axis`, indices on the axis `along` long (more
 * than the axis: duplicates), each other dim random up to data's. */
static void check_scatter_elements(clrun_dtype t, clrun_dtype index_dtype, int axis, int along,
                                   int reduction, uint64_t seed)
{
    uint64_t state = seed;
    clrun_tensor_type dt = shape_type(t, "4,5,3"), it = dt;
    it.dtype = index_dtype;
    for (int d = 0; d < 3; d++)
        it.shape[d] = d == axis ? along : (int64_t)rng_range(&state, 1, (uint64_t)dt.shape[d]);
    clrun_tensor_type ut = it;
    ut.dtype = t;
    uint64_t n = ref_elements(&it);
    void *data = random_elements(t, ref_elements(&dt), reduction != 0, &state);
    void *updates = random_elements(t, n, reduction != 0, &state);
    int64_t *idx = random_indices(n, dt.shape[axis], &state);
    void *idx_dev = as_index_dtype(idx, n, index_dtype);
    one_node node = {"scatter_elements", 3, {dt, it, ut}, {data, idx_dev, updates},
                     {attr_int("axis", axis - 3 * (axis == 2)), attr_int("reduction", reduction)}, 2};
    void *got, *want = malloc((size_t)clrun_tensor_bytes(&dt));
    clrun_tensor_type ot;
    assert_true(ref_scatter_elements(&dt, data, &it, idx, updates, axis, reduction, want));
    if (run_node(&node, &got, &ot) != CLRUN_OK)
        fail_msg("run: %s", clrun_last_error(ctx));
    char what[96];
    snprintf(what, sizeof what, "scatter_elements %s, %s indices, axis %d, reduction %d",
             dtype_name(t), dtype_name(index_dtype), axis, reduction);
    expect_bytes(what, got, want, &dt);
    free(got);
    free(want);
    free(data);
    free(updates);
    free(idx);
    free(idx_dev);
}

static void scatter_elements_moves_every_dtype_as_the_reference(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof every_dtype / sizeof every_dtype[0]; t++)
        for (int axis = 0; axis < 3; axis++) {
            check_scatter_elements(every_dtype[t], CLRUN_I64, axis, 2, 0, 100 + t * 7 + (uint64_t)axis);
            check_scatter_elements(every_dtype[t], CLRUN_I32, axis, 9, 0, 200 + t * 7 + (uint64_t)axis);
        }
}

static void scatter_elements_reductions_apply_in_index_order(void **state)
{
    (void)state;
    const clrun_dtype dtypes[] = {CLRUN_F32, CLRUN_I32, CLRUN_I64, CLRUN_F64};
    for (size_t t = 0; t < 4; t++) {
        if (dtypes[t] == CLRUN_F64 && !device_has_fp64())
            continue;
        for (int reduction = 1; reduction <= 2; reduction++)
            for (int axis = 0; axis < 3; axis++)
                check_scatter_elements(dtypes[t], t % 2 ? CLRUN_I32 : CLRUN_I64, axis, 11,
                                       reduction, 300 + t * 13 + (uint64_t)(reduction * 3 + axis));
    }
}

/* ---- scatter_nd -------------------------------------------------------------------------- */

/* scatter_nd over data [4, 3, 5] with `tuples` index tuples of length k (as [2, tuples / 2, k]
 * when even), random indices (duplicates when tuples exceed the slots). */
static void check_scatter_nd(clrun_dtype t, clrun_dtype index_dtype, int k, int tuples,
                             int reduction, uint64_t seed)
{
    uint64_t state = seed;
    clrun_tensor_type dt = shape_type(t, "4,3,5"), it = {index_dtype, 0, {0}}, ut = {t, 0, {0}};
    if (tuples % 2 == 0) {
        it.shape[it.rank++] = 2;
        it.shape[it.rank++] = tuples / 2;
    } else {
        it.shape[it.rank++] = tuples;
    }
    it.shape[it.rank++] = k;
    for (int d = 0; d < it.rank - 1; d++)
        ut.shape[ut.rank++] = it.shape[d];
    for (int d = k; d < 3; d++)
        ut.shape[ut.rank++] = dt.shape[d];
    uint64_t n = ref_elements(&it);
    int64_t *idx = malloc(n * sizeof *idx);
    for (uint64_t i = 0; i < n; i++) {
        int64_t dim = dt.shape[i % (uint64_t)k];
        idx[i] = (int64_t)rng_range(&state, 0, (uint64_t)(2 * dim - 1)) - dim;
    }
    void *data = random_elements(t, ref_elements(&dt), reduction != 0, &state);
    void *updates = random_elements(t, ref_elements(&ut), reduction != 0, &state);
    void *idx_dev = as_index_dtype(idx, n, index_dtype);
    one_node node = {"scatter_nd", 3, {dt, it, ut}, {data, idx_dev, updates},
                     {attr_int("reduction", reduction)}, 1};
    void *got, *want = malloc((size_t)clrun_tensor_bytes(&dt));
    clrun_tensor_type ot;
    assert_true(ref_scatter_nd(&dt, data, &it, idx, updates, reduction, want));
    if (run_node(&node, &got, &ot) != CLRUN_OK)
        fail_msg("run: %s", clrun_last_error(ctx));
    char what[96];
    snprintf(what, sizeof what, "scatter_nd %s, %s indices, k %d, %d tuples, reduction %d",
             dtype_name(t), dtype_name(index_dtype), k, tuples, reduction);
    expect_bytes(what, got, want, &dt);
    free(got);
    free(want);
    free(data);
    free(updates);
    free(idx);
    free(idx_dev);
}

static void scatter_nd_matches_the_reference(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof every_dtype / sizeof every_dtype[0]; t++)
        for (int k = 1; k <= 3; k++) {
            check_scatter_nd(every_dtype[t], CLRUN_I64, k, 3, 0, 400 + t * 5 + (uint64_t)k);
            check_scatter_nd(every_dtype[t], CLRUN_I32, k, 14, 0, 500 + t * 5 + (uint64_t)k);
        }
    const clrun_dtype dtypes[] = {CLRUN_F32, CLRUN_I32, CLRUN_I64, CLRUN_F64};
    for (size_t t = 0; t < 4; t++) {
        if (dtypes[t] == CLRUN_F64 && !device_has_fp64())
            continue;
        for (int reduction = 1; reduction <= 2; reduction++)
            for (int k = 1; k <= 3; k++)
                check_scatter_nd(dtypes[t], CLRUN_I64, k, 20, reduction,
                                 600 + t * 11 + (uint64_t)(reduction * 3 + k));
    }
}

/* ---- gather_nd --------------------------------------------------------------------------- */

static void check_gather_nd(clrun_dtype t, clrun_dtype index_dtype, int batch, int k,
                            uint64_t seed)
{
    uint64_t state = seed;
    clrun_tensor_type dt = shape_type(t, "3,4,2,5"), it = {index_dtype, 0, {0}};
    for (int d = 0; d < batch; d++)
        it.shape[it.rank++] = dt.shape[d];
    it.shape[it.rank++] = 2;
    it.shape[it.rank++] = 3;
    it.shape[it.rank++] = k;
    uint64_t n = ref_elements(&it);
    int64_t *idx = malloc(n * sizeof *idx);
    for (uint64_t i = 0; i < n; i++) {
        int64_t dim = dt.shape[batch + (int)(i % (uint64_t)k)];
        idx[i] = (int64_t)rng_range(&state, 0, (uint64_t)(2 * dim - 1)) - dim;
    }
    void *data = random_elements(t, ref_elements(&dt), false, &state);
    void *idx_dev = as_index_dtype(idx, n, index_dtype);
    one_node node = {"gather_nd", 2, {dt, it}, {data, idx_dev}, {attr_int("batch_dims", batch)}, 1};
    void *got;
    clrun_tensor_type ot;
    if (run_node(&node, &got, &ot) != CLRUN_OK)
        fail_msg("run: %s", clrun_last_error(ctx));
    assert_int_equal(ot.rank, it.rank - 1 + dt.rank - batch - k);
    void *want = malloc((size_t)clrun_tensor_bytes(&ot) + 8);
    assert_true(ref_gather_nd(&dt, data, &it, idx, batch, want));
    char what[96];
    snprintf(what, sizeof what, "gather_nd %s, %s indices, batch_dims %d, k %d", dtype_name(t),
             dtype_name(index_dtype), batch, k);
    expect_bytes(what, got, want, &ot);
    free(got);
    free(want);
    free(data);
    free(idx);
    free(idx_dev);
}

static void gather_nd_matches_the_reference(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof every_dtype / sizeof every_dtype[0]; t++)
        for (int batch = 0; batch <= 1; batch++)
            for (int k = 1; k <= 4 - batch; k++)
                check_gather_nd(every_dtype[t], (t + (size_t)k) % 2 ? CLRUN_I32 : CLRUN_I64,
                                batch, k, 700 + t * 17 + (uint64_t)(batch * 5 + k));
}

/* ---- top_k_indices ----------------------------------------------------------------------- */

/* x [3, 6, 4] with values from a small set (ties), NaN in f32 and f64. */
static void check_top_k(clrun_dtype t, int axis, int64_t k, bool largest, uint64_t seed)
{
    uint64_t state = seed;
    clrun_tensor_type xt = shape_type(t, "3,6,4");
    uint64_t n = ref_elements(&xt);
    double *values = malloc(n * sizeof *values);
    void *x = malloc(n * 8);
    for (uint64_t i = 0; i < n; i++) {
        int64_t v = (int64_t)rng_range(&state, 0, 6) - 3;
        bool nan = (t == CLRUN_F32 || t == CLRUN_F64) && rng_range(&state, 0, 9) == 0;
        values[i] = nan ? NAN : (double)v * (t == CLRUN_I64 ? 1e12 : 1);
        if (t == CLRUN_F32) {
            float f = (float)values[i];
            memcpy((char *)x + 4 * i, &f, 4);
        } else if (t == CLRUN_F64) {
            memcpy((char *)x + 8 * i, &values[i], 8);
        } else if (t == CLRUN_I32) {
            int32_t w = (int32_t)v;
            memcpy((char *)x + 4 * i, &w, 4);
        } else {
            int64_t w = (int64_t)values[i];
            memcpy((char *)x + 8 * i, &w, 8);
        }
    }
    one_node node = {"top_k_indices", 1, {xt}, {x},
                     {attr_int("k", k), attr_int("axis", axis), attr_int("largest", largest)}, 3};
    void *got;
    clrun_tensor_type ot;
    if (run_node(&node, &got, &ot) != CLRUN_OK)
        fail_msg("run: %s", clrun_last_error(ctx));
    assert_int_equal(ot.dtype, CLRUN_I64);
    assert_int_equal(ot.shape[axis], k);
    int64_t *want = malloc((size_t)clrun_tensor_bytes(&ot));
    ref_top_k(&xt, values, axis, k, largest, want);
    char what[96];
    snprintf(what, sizeof what, "top_k_indices %s, axis %d, k %lld, largest %d", dtype_name(t),
             axis, (long long)k, largest);
    expect_bytes(what, got, want, &ot);
    free(got);
    free(want);
    free(values);
    free(x);
}

static void top_k_matches_the_reference_with_ties_and_nan(void **state)
{
    (void)state;
    const clrun_dtype dtypes[] = {CLRUN_F32, CLRUN_I32, CLRUN_I64, CLRUN_F64};
    for (size_t t = 0; t < 4; t++) {
        if (dtypes[t] == CLRUN_F64 && !device_has_fp64())
            continue;
        for (int axis = 0; axis < 3; axis++)
            for (int largest = 0; largest <= 1; largest++) {
                clrun_tensor_type xt = shape_type(dtypes[t], "3,6,4");
                check_top_k(dtypes[t], axis, 1, largest, 800 + t * 19 + (uint64_t)(axis * 2 + largest));
                check_top_k(dtypes[t], axis, xt.shape[axis], largest, 900 + t * 19 + (uint64_t)axis);
                check_top_k(dtypes[t], axis, (xt.shape[axis] + 1) / 2, largest, 950 + t + (uint64_t)axis);
            }
    }
}

/* ---- indices outside the data ------------------------------------------------------------ */

/* Runs op over data f32 [4, 3] (and updates) with the i64 indices given; returns the status. */
static clrun_status run_with_indices(const char *op, const clrun_tensor_type *it, const int64_t *idx,
                                     const clrun_tensor_type *ut)
{
    clrun_tensor_type dt = shape_type(CLRUN_F32, "4,3");
    float data[12] = {0}, updates[64] = {0};
    one_node node = {op, ut ? 3 : 2, {dt, *it, ut ? *ut : dt}, {data, idx, updates}, {{0}}, 0};
    void *out;
    clrun_tensor_type ot;
    clrun_status s = run_node(&node, &out, &ot);
    free(out);
    return s;
}

static void expect_message(const char *op, const char *position)
{
    const char *msg = clrun_last_error(ctx);
    char want[64];
    snprintf(want, sizeof want, "'out' (%s)", op);
    if (!strstr(msg, want) || !strstr(msg, position))
        fail_msg("%s: message '%s'", op, msg);
}

static void an_index_outside_the_data_fails_the_run_and_names_it(void **state)
{
    (void)state;
    /* scatter_elements: position 4 (4 on an axis of length 4) */
    clrun_tensor_type it = shape_type(CLRUN_I64, "2,3"), ut = shape_type(CLRUN_F32, "2,3");
    int64_t idx[6] = {0, 1, -4, 3, 4, 0};
    assert_int_equal(run_with_indices("scatter_elements", &it, idx, &ut), CLRUN_ERROR_INVALID_ARGUMENT);
    expect_message("scatter_elements", "position 4 of its indices is outside the axis of length 4");
    idx[4] = -1;
    assert_int_equal(run_with_indices("scatter_elements", &it, idx, &ut), CLRUN_OK);
    /* scatter_nd: tuple 1 is (0, -4): -4 is outside the dim of 3 */
    clrun_tensor_type nt = shape_type(CLRUN_I64, "3,2"), nu = shape_type(CLRUN_F32, "3");
    int64_t tuples[6] = {0, 0, 0, -4, 3, 2};
    assert_int_equal(run_with_indices("scatter_nd", &nt, tuples, &nu), CLRUN_ERROR_INVALID_ARGUMENT);
    expect_message("scatter_nd", "index tuple at position 1 of its indices is outside dims [4, 3]");
    /* gather_nd: tuple 2 is (4, 0) */
    tuples[3] = 2;
    tuples[4] = 4;
    assert_int_equal(run_with_indices("gather_nd", &nt, tuples, NULL), CLRUN_ERROR_INVALID_ARGUMENT);
    expect_message("gather_nd", "index tuple at position 2");
    tuples[4] = -4;
    assert_int_equal(run_with_indices("gather_nd", &nt, tuples, NULL), CLRUN_OK);
}

/* ---- type rules -------------------------------------------------------------------------- */

/* The graph's refusal of op over inputs of these types, which must contain `want`. */
static void expect_refusal(const char *op, int n, const clrun_tensor_type *types,
                           const clrun_attr *attrs, int attr_count, const char *want)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("refusal", &g), CLRUN_OK);
    clrun_tensor_id in[3], y;
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        assert_int_equal(clrun_graph_add_input(g, name, &types[i], false, &in[i]), CLRUN_OK);
    }
    const char *names[] = {"out"};
    assert_int_equal(clrun_graph_add_node(g, op, in, n, names, 1, attrs, attr_count, &y),
                     CLRUN_ERROR_INVALID_GRAPH);
    if (!strstr(clrun_graph_last_error(g), want))
        fail_msg("%s: '%s' lacks '%s'", op, clrun_graph_last_error(g), want);
    clrun_graph_destroy(g);
}

static void the_type_rules_name_what_they_refuse(void **state)
{
    (void)state;
    clrun_tensor_type bools[3] = {shape_type(CLRUN_BOOL, "4,3"), shape_type(CLRUN_I64, "2,3"),
                                  shape_type(CLRUN_BOOL, "2,3")};
    clrun_attr add = attr_int("reduction", 1), bad_reduction = attr_int("reduction", 3);
    expect_refusal("scatter_elements", 3, bools, &add, 1, "reduction 'add' of bool[4, 3]");
    expect_refusal("scatter_elements", 3, bools, &bad_reduction, 1, "attribute 'reduction' is 3");
    clrun_tensor_type wide[3] = {shape_type(CLRUN_F32, "4,3"), shape_type(CLRUN_I64, "2,4"),
                                 shape_type(CLRUN_F32, "2,4")};
    expect_refusal("scatter_elements", 3, wide, NULL, 0, "no larger off axis 0");
    clrun_tensor_type f16x[1] = {shape_type(CLRUN_F16, "4,3")};
    clrun_attr k = attr_int("k", 2), k_big = attr_int("k", 4);
    expect_refusal("top_k_indices", 1, f16x, &k, 1, "computed on f32, f64, i32 and i64 only");
    clrun_tensor_type fx[1] = {shape_type(CLRUN_F32, "4,3")};
    expect_refusal("top_k_indices", 1, fx, &k_big, 1, "attribute 'k' is 4: must be 1 to 3");
    clrun_tensor_type nd[3] = {shape_type(CLRUN_F32, "4,3"), shape_type(CLRUN_I64, "5,1"),
                               shape_type(CLRUN_F32, "5,4")};
    expect_refusal("scatter_nd", 3, nd, NULL, 0, "updates are f32[5, 4]: data f32[4, 3] and "
                   "indices i64[5, 1] want f32[5, 3]");
    clrun_tensor_type long_tuples[2] = {shape_type(CLRUN_F32, "4,3"), shape_type(CLRUN_I64, "5,3")};
    expect_refusal("gather_nd", 2, long_tuples, NULL, 0, "tuples of 3 indices");
    clrun_tensor_type batch[2] = {shape_type(CLRUN_F32, "4,3"), shape_type(CLRUN_I64, "3,1")};
    clrun_attr b1 = attr_int("batch_dims", 1);
    expect_refusal("gather_nd", 2, batch, &b1, 1, "batch dimension 0 differs");
}

static int setup(void **state)
{
    (void)state;
    return clrun_context_create(NULL, &ctx) == CLRUN_OK ? 0 : -1;
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
        cmocka_unit_test(scatter_elements_moves_every_dtype_as_the_reference),
        cmocka_unit_test(scatter_elements_reductions_apply_in_index_order),
        cmocka_unit_test(scatter_nd_matches_the_reference),
        cmocka_unit_test(gather_nd_matches_the_reference),
        cmocka_unit_test(top_k_matches_the_reference_with_ties_and_nan),
        cmocka_unit_test(an_index_outside_the_data_fails_the_run_and_names_it),
        cmocka_unit_test(the_type_rules_name_what_they_refuse),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    clrun_test_remove_dir(cache_dir);
    return failed;
}
