/* matmul_integer and conv_integer on a real device, built with the graph API and run by an
 * executor, against the plain C reference of op_reference.c: random u8 and i8 operands in every
 * pairing, every zero-point form (none, a scalar of rank 0 or [1], per row, per column, per output
 * channel), broadcast batches, sizes that are not multiples of the tiles, grouped, strided,
 * dilated and asymmetrically padded convolutions, and sums past 2^31 that must wrap as int32.
 * Integer results are compared exactly. Also: constant 8-bit weights stay resident at one byte
 * each, and the type rules refuse what they do not take, by name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <clrun/clrun.h>

#include "device_test.h"
#include "op_args.h"
#include "op_reference.h"
#include "rng.h"

static char cache_dir[512];
static clrun_context *ctx;

/* One 8-bit tensor: its type, its bytes for the device and its values for the reference. */
typedef struct qtensor {
    clrun_tensor_type type;
    uint8_t *bytes;
    int *values;
    bool constant;
} qtensor;

static qtensor random_tensor(clrun_dtype dtype, clrun_tensor_type shape, uint64_t *rng)
{
    qtensor t = {shape, NULL, NULL, false};
    t.type.dtype = dtype;
    uint64_t n = ref_elements(&t.type);
    t.bytes = malloc(n + 1);
    t.values = malloc((n + 1) * sizeof *t.values);
    for (uint64_t i = 0; i < n; i++) {
        t.bytes[i] = (uint8_t)rng_next(rng);
        t.values[i] = dtype == CLRUN_I8 ? (int)(int8_t)t.bytes[i] : (int)t.bytes[i];
    }
    return t;
}

static qtensor filled_tensor(clrun_dtype dtype, clrun_tensor_type shape, int value)
{
    qtensor t = {shape, NULL, NULL, false};
    t.type.dtype = dtype;
    uint64_t n = ref_elements(&t.type);
    t.bytes = malloc(n + 1);
    t.values = malloc((n + 1) * sizeof *t.values);
    for (uint64_t i = 0; i < n; i++)
        t.bytes[i] = (uint8_t)value, t.values[i] = value;
    return t;
}

static void tensor_free(qtensor *t)
{
    free(t->bytes);
    free(t->values);
}

/* Runs `op` over inputs[0..count) (graph inputs, or constants where marked) with attrs, twice
 * (the same bits both times); returns the i32 output (malloc'd), its type into *out and the
 * executor's constant bytes into *constant_bytes (may be NULL). */
static int32_t *run_op(const char *op, const qtensor *inputs, int count, const clrun_attr *attrs, int na,
                       clrun_tensor_type *out, uint64_t *constant_bytes)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("q", &g), CLRUN_OK);
    clrun_tensor_id ids[4], y;
    clrun_buffer bufs[4];
    int live = 0;
    for (int i = 0; i < count; i++) {
        char name[8];
        snprintf(name, sizeof name, "in%d", i);
        if (inputs[i].constant) {
            assert_int_equal(clrun_graph_add_constant(g, name, &inputs[i].type, inputs[i].bytes, CLRUN_FILL_ZEROS,
                                                      0, 0, 0, &ids[i]), CLRUN_OK);
            continue;
        }
        assert_int_equal(clrun_graph_add_input(g, name, &inputs[i].type, false, &ids[i]), CLRUN_OK);
        assert_int_equal(clrun_alloc(ctx, ref_elements(&inputs[i].type), &bufs[live]), CLRUN_OK);
        assert_int_equal(clrun_buffer_write(ctx, &bufs[live], inputs[i].bytes), CLRUN_OK);
        live++;
    }
    const char *names[] = {"y"};
    if (clrun_graph_add_node(g, op, ids, count, names, 1, attrs, na, &y) != CLRUN_OK)
        fail_msg("%s refused: %s", op, clrun_graph_last_error(g));
    assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
    *out = *clrun_graph_tensor_type(g, y);
    assert_int_equal(out->dtype, CLRUN_I32);
    clrun_exec *exec = NULL;
    if (clrun_exec_create(ctx, g, NULL, &exec) != CLRUN_OK)
        fail_msg("executor: %s", clrun_last_error(ctx));
    uint64_t bytes = ref_elements(out) * 4;
    int32_t *result = malloc(bytes), *again = malloc(bytes);
    for (int run = 0; run < 2; run++) {
        if (clrun_exec_run(exec, bufs, live) != CLRUN_OK)
            fail_msg("run: %s", clrun_last_error(ctx));
        assert_int_equal(clrun_exec_read_output(exec, 0, run ? again : result, bytes), CLRUN_OK);
    }
    if (memcmp(result, again, bytes) != 0)
        fail_msg("%s: the second run gives other bits", op);
    if (constant_bytes) {
        clrun_exec_stats stats;
        assert_int_equal(clrun_exec_stats_get(exec, &stats), CLRUN_OK);
        *constant_bytes = stats.constant_bytes;
    }
    free(again);
    for (int i = 0; i < live; i++)
        clrun_free(ctx, &bufs[i]);
    clrun_exec_destroy(exec);
    clrun_graph_destroy(g);
    return result;
}

static void expect_equal(const char *what, const int32_t *got, const int32_t *ref, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (got[i] != ref[i])
            fail_msg("%s: element %llu is %d, reference %d", what, (unsigned long long)i, got[i], ref[i]);
}

/* ---- matmul_integer ---------------------------------------------------------------------- */

/* Zero-point forms: none, one value of rank 0, one value as [1], one per row/column. */
enum { Z_NONE, Z_RANK0, Z_ONE, Z_VECTOR, Z_FORMS };

static qtensor zero_tensor(clrun_dtype dtype, int form, int64_t length, uint64_t *rng)
{
    clrun_tensor_type t = {dtype, 0, {0}};
    if (form == Z_ONE)
        t = (clrun_tensor_type){dtype, 1, {1}};
    else if (form == Z_VECTOR)
        t = (clrun_tensor_type){dtype, 1, {length}};
    return random_tensor(dtype, t, rng);
}

/* a [ta's dims] times b, with zero points of forms za, zb (a Z_NONE za before a present zb is
 * given as an explicit 0, as the op takes it). */
static void check_matmul(clrun_tensor_type ta, clrun_tensor_type tb, clrun_dtype da, clrun_dtype db, int za,
                         int zb, uint64_t seed)
{
    uint64_t rng = seed;
    int64_t M = ta.shape[ta.rank - 2], N = tb.shape[tb.rank - 1];
    qtensor in[4] = {random_tensor(da, ta, &rng), random_tensor(db, tb, &rng)};
    int count = 2;
    if (za != Z_NONE || zb != Z_NONE) {
        in[2] = za == Z_NONE ? filled_tensor(da, (clrun_tensor_type){da, 0, {0}}, 0) : zero_tensor(da, za, M, &rng);
        count = 3;
    }
    if (zb != Z_NONE)
        in[count++] = zero_tensor(db, zb, N, &rng);
    clrun_tensor_type out;
    int32_t *got = run_op("matmul_integer", in, count, NULL, 0, &out, NULL);
    uint64_t n = ref_elements(&out);
    int32_t *ref = malloc(n * sizeof *ref);
    ref_matmul_integer(&ta, in[0].values, &tb, in[1].values, count > 2 ? in[2].values : NULL,
                       count > 2 ? (za == Z_VECTOR ? (int)M : 1) : 0, count > 3 ? in[3].values : NULL,
                       count > 3 ? (zb == Z_VECTOR ? (int)N : 1) : 0, &out, ref);
    char what[160];
    snprintf(what, sizeof what, "matmul_integer %s x %s, a %s, b %s, zero forms %d/%d, seed %llu",
             da == CLRUN_I8 ? "i8" : "u8", db == CLRUN_I8 ? "i8" : "u8",
             ta.rank > 2 ? "batched" : "matrix", tb.rank > 2 ? "batched" : "matrix", za, zb,
             (unsigned long long)seed);
    expect_equal(what, got, ref, n);
    free(ref);
    free(got);
    for (int i = 0; i < count; i++)
        tensor_free(&in[i]);
}

static void matmul_integer_matches_the_reference(void **state)
{
    (void)state;
    static const clrun_dtype dt[2] = {CLRUN_U8, CLRUN_I8};
    uint64_t seed = 100;
    /* every dtype pairing and zero-point form, on sizes off the tile */
    for (int d = 0; d < 4; d++)
        for (int za = 0; za < Z_FORMS; za++)
            for (int zb = 0; zb < Z_FORMS; zb++)
                check_matmul(shape_type(CLRUN_U8, "17,21"), shape_type(CLRUN_U8, "21,19"), dt[d & 1],
                             dt[d >> 1], za, zb, seed++);
    /* random sizes: single rows and columns, K below and above a tile */
    uint64_t rng = 7;
    for (int i = 0; i < 12; i++) {
        int64_t M = 1 + (int64_t)(rng_next(&rng) % 40), K = 1 + (int64_t)(rng_next(&rng) % 70);
        int64_t N = 1 + (int64_t)(rng_next(&rng) % 40);
        clrun_tensor_type ta = {CLRUN_U8, 2, {M, K}}, tb = {CLRUN_U8, 2, {K, N}};
        check_matmul(ta, tb, dt[i & 1], dt[(i >> 1) & 1], (int)(rng_next(&rng) % Z_FORMS),
                     (int)(rng_next(&rng) % Z_FORMS), seed++);
    }
}

static void matmul_integer_broadcasts_batches(void **state)
{
    (void)state;
    check_matmul(shape_type(CLRUN_U8, "2,1,5,9"), shape_type(CLRUN_U8, "3,9,7"), CLRUN_U8, CLRUN_I8, Z_VECTOR,
                 Z_VECTOR, 300);
    check_matmul(shape_type(CLRUN_U8, "13,18"), shape_type(CLRUN_U8, "4,18,3"), CLRUN_I8, CLRUN_U8, Z_RANK0,
                 Z_VECTOR, 301);
    check_matmul(shape_type(CLRUN_U8, "3,17,33"), shape_type(CLRUN_U8, "33,16"), CLRUN_U8, CLRUN_U8, Z_VECTOR,
                 Z_ONE, 302);
    check_matmul(shape_type(CLRUN_U8, "2,3,4,5"), shape_type(CLRUN_U8, "2,3,5,6"), CLRUN_I8, CLRUN_I8, Z_NONE,
                 Z_NONE, 303);
}

/* 255 · 255 · 40000 = 2 601 000 000 > 2^31: the sum wraps as int32 does. */
static void matmul_integer_wraps_as_int32(void **state)
{
    (void)state;
    clrun_tensor_type ta = shape_type(CLRUN_U8, "2,40000"), tb = shape_type(CLRUN_U8, "40000,3");
    qtensor in[2] = {filled_tensor(CLRUN_U8, ta, 255), filled_tensor(CLRUN_U8, tb, 255)};
    clrun_tensor_type out;
    int32_t *got = run_op("matmul_integer", in, 2, NULL, 0, &out, NULL);
    int32_t want = (int32_t)(uint32_t)(255u * 255u * 40000u);
    for (int i = 0; i < 6; i++)
        if (got[i] != want)
            fail_msg("element %d is %d: the wrapped sum is %d", i, got[i], want);
    free(got);
    tensor_free(&in[0]);
    tensor_free(&in[1]);
}

/* Constant weights and zero points are resident as their bytes (the executor keeps constants at
 * their dtype; the kernels read them as they are). */
static void constant_weights_stay_bytes(void **state)
{
    (void)state;
    uint64_t rng = 9;
    clrun_tensor_type ta = shape_type(CLRUN_I8, "5,64"), tb = shape_type(CLRUN_I8, "64,48");
    qtensor in[4] = {random_tensor(CLRUN_U8, ta, &rng), random_tensor(CLRUN_I8, tb, &rng),
                     zero_tensor(CLRUN_U8, Z_RANK0, 5, &rng), zero_tensor(CLRUN_I8, Z_VECTOR, 48, &rng)};
    in[1].constant = in[3].constant = true;
    clrun_tensor_type out;
    uint64_t constant_bytes = 0;
    int32_t *got = run_op("matmul_integer", in, 4, NULL, 0, &out, &constant_bytes);
    assert_int_equal(constant_bytes, 64 * 48 + 48);
    int32_t ref[5 * 48];
    ref_matmul_integer(&ta, in[0].values, &tb, in[1].values, in[2].values, 1, in[3].values, 48, &out, ref);
    expect_equal("matmul_integer over constant weights", got, ref, 5 * 48);
    free(got);
    for (int i = 0; i < 4; i++)
        tensor_free(&in[i]);
}

/* ---- conv_integer ------------------------------------------------------------------------ */

typedef struct qconv_case {
    int N, C, O, H, W, KH, KW;
    int stride[2], pads[4], dilation[2], groups;
    clrun_dtype dx, dw;
    int x_zero, w_zero; /* forms: Z_NONE, Z_RANK0, Z_ONE, Z_VECTOR (w only) */
} qconv_case;

static int extent(int in, int before, int after, int k, int stride, int dilation)
{
    int room = in + before + after - dilation * (k - 1) - 1;
    return room < 0 ? 0 : room / stride + 1;
}

static void check_conv(const qconv_case *c, uint64_t seed)
{
    uint64_t rng = seed;
    clrun_tensor_type tx = {c->dx, 4, {c->N, c->C, c->H, c->W}};
    clrun_tensor_type tw = {c->dw, 4, {c->O, c->C / c->groups, c->KH, c->KW}};
    qtensor in[4] = {random_tensor(c->dx, tx, &rng), random_tensor(c->dw, tw, &rng)};
    int count = 2;
    if (c->x_zero != Z_NONE || c->w_zero != Z_NONE) {
        in[2] = c->x_zero == Z_NONE ? filled_tensor(c->dx, (clrun_tensor_type){c->dx, 0, {0}}, 0)
                                    : zero_tensor(c->dx, c->x_zero, 1, &rng);
        count = 3;
    }
    if (c->w_zero != Z_NONE)
        in[count++] = zero_tensor(c->dw, c->w_zero, c->O, &rng);
    const int64_t stride[2] = {c->stride[0], c->stride[1]}, dilation[2] = {c->dilation[0], c->dilation[1]};
    const int64_t pads[4] = {c->pads[0], c->pads[1], c->pads[2], c->pads[3]};
    clrun_attr a[4] = {attr_ints("stride", 2, stride), attr_ints("pads", 4, pads),
                       attr_ints("dilation", 2, dilation), attr_int("groups", c->groups)};
    clrun_tensor_type out;
    int32_t *got = run_op("conv_integer", in, count, a, 4, &out, NULL);
    assert_int_equal(out.shape[2], extent(c->H, c->pads[0], c->pads[2], c->KH, c->stride[0], c->dilation[0]));
    assert_int_equal(out.shape[3], extent(c->W, c->pads[1], c->pads[3], c->KW, c->stride[1], c->dilation[1]));
    uint64_t n = ref_elements(&out);
    int32_t *ref = malloc(n * sizeof *ref);
    ref_conv ctype = {{c->stride[0], c->stride[1]}, {c->pads[0], c->pads[1]}, {c->dilation[0], c->dilation[1]},
                      c->groups};
    ref_conv_integer(&tx, in[0].values, &tw, in[1].values, count > 2 ? in[2].values[0] : 0,
                     count > 3 ? in[3].values : NULL, count > 3 ? (c->w_zero == Z_VECTOR ? c->O : 1) : 0, &ctype,
                     &out, ref);
    char what[256];
    snprintf(what, sizeof what, "conv_integer x %s [%d, %d, %d, %d], w %s [%d, %d, %d, %d], stride %d,%d, "
             "pads %d,%d,%d,%d, dilation %d,%d, groups %d, zero forms %d/%d, seed %llu",
             c->dx == CLRUN_I8 ? "i8" : "u8", c->N, c->C, c->H, c->W, c->dw == CLRUN_I8 ? "i8" : "u8", c->O,
             c->C / c->groups, c->KH, c->KW, c->stride[0], c->stride[1], c->pads[0], c->pads[1], c->pads[2],
             c->pads[3], c->dilation[0], c->dilation[1], c->groups, c->x_zero, c->w_zero,
             (unsigned long long)seed);
    expect_equal(what, got, ref, n);
    free(ref);
    free(got);
    for (int i = 0; i < count; i++)
        tensor_free(&in[i]);
}

static void conv_integer_matches_the_reference(void **state)
{
    (void)state;
    static const qconv_case fixed[] = {
        /* ONNX's test_basic_convinteger: u8 3x3 image, 2x2 kernel, x_zero 1 */
        {1, 1, 1, 3, 3, 2, 2, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, CLRUN_U8, CLRUN_U8, Z_RANK0, Z_NONE},
        {2, 3, 4, 8, 8, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, CLRUN_U8, CLRUN_I8, Z_ONE, Z_VECTOR},
        {1, 4, 6, 9, 7, 3, 3, {2, 2}, {1, 0, 2, 1}, {1, 1}, 2, CLRUN_I8, CLRUN_I8, Z_NONE, Z_RANK0},
        {1, 6, 6, 7, 7, 3, 3, {1, 1}, {2, 2, 2, 2}, {2, 2}, 6, CLRUN_U8, CLRUN_U8, Z_RANK0, Z_VECTOR},
        {2, 16, 5, 6, 5, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, CLRUN_I8, CLRUN_U8, Z_NONE, Z_NONE},
        /* more taps than one staged chunk (256): 32 channels x 3 x 3 */
        {1, 32, 3, 5, 5, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, CLRUN_U8, CLRUN_I8, Z_RANK0, Z_VECTOR},
        /* more pixels than one work-group */
        {1, 2, 2, 13, 11, 2, 2, {1, 1}, {0, 0, 1, 1}, {1, 1}, 1, CLRUN_U8, CLRUN_U8, Z_ONE, Z_ONE},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        check_conv(&fixed[i], 500 + i);
    static const clrun_dtype dt[2] = {CLRUN_U8, CLRUN_I8};
    uint64_t rng = 11;
    for (int i = 0; i < 16; i++) {
        qconv_case c;
        memset(&c, 0, sizeof c);
        c.groups = 1 + (int)(rng_next(&rng) % 3);
        c.N = 1 + (int)(rng_next(&rng) % 2);
        c.C = c.groups * (1 + (int)(rng_next(&rng) % 3));
        c.O = c.groups * (1 + (int)(rng_next(&rng) % 3));
        c.H = 1 + (int)(rng_next(&rng) % 10), c.W = 1 + (int)(rng_next(&rng) % 10);
        c.KH = 1 + (int)(rng_next(&rng) % 3), c.KW = 1 + (int)(rng_next(&rng) % 3);
        for (int a = 0; a < 2; a++) {
            c.stride[a] = 1 + (int)(rng_next(&rng) % 3);
            c.dilation[a] = 1 + (int)(rng_next(&rng) % 2);
            c.pads[a] = (int)(rng_next(&rng) % 3);
            c.pads[2 + a] = (int)(rng_next(&rng) % 3);
        }
        c.dx = dt[rng_next(&rng) % 2], c.dw = dt[rng_next(&rng) % 2];
        c.x_zero = (int)(rng_next(&rng) % 3); /* none, rank 0, [1] */
        c.w_zero = (int)(rng_next(&rng) % Z_FORMS);
        if (extent(c.H, c.pads[0], c.pads[2], c.KH, c.stride[0], c.dilation[0]) < 1 ||
            extent(c.W, c.pads[1], c.pads[3], c.KW, c.stride[1], c.dilation[1]) < 1)
            continue;
        check_conv(&c, 600 + (uint64_t)i);
    }
}

/* ---- refusals ---------------------------------------------------------------------------- */

/* `op` over inputs of these types (and attrs) must be refused, with `word` in its reason. */
static void expect_refusal(const char *op, const clrun_tensor_type *types, int count, const clrun_attr *attrs,
                           int na, const char *word)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("refuse", &g), CLRUN_OK);
    clrun_tensor_id ids[4], y;
    for (int i = 0; i < count; i++) {
        char name[8];
        snprintf(name, sizeof name, "in%d", i);
        assert_int_equal(clrun_graph_add_input(g, name, &types[i], false, &ids[i]), CLRUN_OK);
    }
    const char *names[] = {"y"};
    if (clrun_graph_add_node(g, op, ids, count, names, 1, attrs, na, &y) == CLRUN_OK)
        fail_msg("%s accepted what it should refuse (expected '%s')", op, word);
    const char *why = clrun_graph_last_error(g);
    if (!strstr(why, op) || !strstr(why, word))
        fail_msg("%s: the reason '%s' lacks '%s'", op, why, word);
    clrun_graph_destroy(g);
}

static void type_rules_refuse_what_they_do_not_take(void **state)
{
    (void)state;
    clrun_tensor_type t[4] = {shape_type(CLRUN_U8, "4,5"), shape_type(CLRUN_I8, "5,6"), shape_type(CLRUN_U8, ""),
                              shape_type(CLRUN_I8, "6")};
    expect_refusal("matmul_integer", t, 1, NULL, 0, "takes 2 to 4 inputs");
    t[0].dtype = CLRUN_F32;
    expect_refusal("matmul_integer", t, 2, NULL, 0, "a is f32[4, 5]: expected u8 or i8");
    t[0].dtype = CLRUN_U8;
    t[1] = shape_type(CLRUN_I8, "4,6");
    expect_refusal("matmul_integer", t, 2, NULL, 0, "inner dimensions differ");
    t[1] = shape_type(CLRUN_I8, "5,6");
    t[2].dtype = CLRUN_I8;
    expect_refusal("matmul_integer", t, 3, NULL, 0, "a_zero is i8[]: expected u8, its operand's dtype");
    t[2] = shape_type(CLRUN_U8, "5");
    expect_refusal("matmul_integer", t, 3, NULL, 0, "a_zero is u8[5]: expected a scalar or [4] (one per row of a)");
    t[2] = shape_type(CLRUN_U8, "");
    t[3] = shape_type(CLRUN_I8, "1,6");
    expect_refusal("matmul_integer", t, 4, NULL, 0, "b_zero is i8[1, 6]: expected a scalar or [6]");
    t[3] = shape_type(CLRUN_I8, "6");
    clrun_attr ta = attr_int("transpose_a", 1);
    expect_refusal("matmul_integer", t, 4, &ta, 1, "unknown attribute 'transpose_a'");

    clrun_tensor_type c[4] = {shape_type(CLRUN_U8, "1,4,6,6"), shape_type(CLRUN_I8, "3,4,3,3"),
                              shape_type(CLRUN_U8, ""), shape_type(CLRUN_I8, "3")};
    c[2] = shape_type(CLRUN_U8, "4");
    expect_refusal("conv_integer", c, 3, NULL, 0, "x_zero is u8[4]: expected a scalar");
    c[2] = shape_type(CLRUN_U8, "");
    c[3] = shape_type(CLRUN_I8, "4");
    expect_refusal("conv_integer", c, 4, NULL, 0, "w_zero is i8[4]: expected a scalar or [3] (one per output channel)");
    c[3] = shape_type(CLRUN_U8, "3");
    expect_refusal("conv_integer", c, 4, NULL, 0, "w_zero is u8[3]: expected i8, its operand's dtype");
    c[1] = shape_type(CLRUN_I32, "3,4,3,3");
    expect_refusal("conv_integer", c, 2, NULL, 0, "w is i32[3, 4, 3, 3]: expected u8 or i8");
    c[1] = shape_type(CLRUN_I8, "3,2,3,3");
    expect_refusal("conv_integer", c, 2, NULL, 0, "groups");
    c[1] = shape_type(CLRUN_I8, "3,4,7,7");
    expect_refusal("conv_integer", c, 2, NULL, 0, "does not fit");
    c[1] = shape_type(CLRUN_I8, "3,4,3,3");
    clrun_attr op = attr_int("output_padding", 1);
    expect_refusal("conv_integer", c, 2, &op, 1, "unknown attribute 'output_padding'");
}

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
        cmocka_unit_test(matmul_integer_matches_the_reference),
        cmocka_unit_test(matmul_integer_broadcasts_batches),
        cmocka_unit_test(matmul_integer_wraps_as_int32),
        cmocka_unit_test(constant_weights_stay_bytes),
        cmocka_unit_test(conv_integer_matches_the_reference),
        cmocka_unit_test(type_rules_refuse_what_they_do_not_take),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    clrun_test_remove_dir(cache_dir);
    return failed;
}
