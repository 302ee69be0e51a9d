/* The layout, index and resize ops on a real device against the plain C references of
 * layout_reference.c, in every dtype they take (random bytes: every bit pattern must survive),
 * on the ONNX conformance suite's shapes and attributes and on odd ones; the refusals by name;
 * the ops that may run in place giving the same bits in place; and a graph of them giving the
 * same bits in every executor mode. Moves are exact; sums and interpolations are compared with
 * a tolerance stated where they are. */
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

#include "device_test.h"
#include "op_args.h"
#include "graph/layout_geometry.h"
#include "graph/types.h"
#include "layout_reference.h"
#include "ops/ops.h"
#include "ops/ops_internal.h"
#include "rng.h"

static char cache_dir[512];
static clrun_context *ctx;
static uint64_t current_seed; /* of the running check's data, for failure messages */
static char last_resize_kernel[64]; /* the kernel run_node's last resize prepared */

static const clrun_dtype every_dtype[] = {CLRUN_F32, CLRUN_I32, CLRUN_F16,
                                          CLRUN_I64, CLRUN_BOOL, CLRUN_F64};
#define DTYPE_COUNT (sizeof every_dtype / sizeof every_dtype[0])

/* ---- types, attributes, data ------------------------------------------------------------- */

/* type(CLRUN_F32, "2,3,4"); "" is a scalar. */
static clrun_tensor_type type(clrun_dtype dtype, const char *dims)
{
    return shape_type(dtype, dims);
}

#define INTS(name, ...) \
    attr_ints(name, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

static void *random_bytes(size_t n, uint64_t seed)
{
    unsigned char *p = malloc(n + 8);
    uint64_t state = seed;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = rng_next(&state);
        memcpy(p + i, &v, 8);
    }
    return p;
}

/* Indices of `dtype` (i32 or i64) from int64 values; seen[i] gets the value the device reads
 * (an int64 truncated to i32 may change). */
static void *index_data(clrun_dtype dtype, const int64_t *values, size_t n, int64_t *seen)
{
    void *p = malloc(n * 8 + 8);
    for (size_t i = 0; i < n; i++) {
        if (dtype == CLRUN_I32) {
            int32_t v = (int32_t)(uint32_t)(uint64_t)values[i];
            memcpy((char *)p + 4 * i, &v, 4);
            seen[i] = v;
        } else {
            memcpy((char *)p + 8 * i, &values[i], 8);
            seen[i] = values[i];
        }
    }
    return p;
}

static size_t bytes_of(const clrun_tensor_type *t) { return (size_t)clrun_tensor_bytes(t); }

/* ---- running one node -------------------------------------------------------------------- */

typedef struct node {
    const char *op;
    int input_count;
    clrun_tensor_type in[4];
    const void *data[4];
    clrun_attr attrs[16]; /* resize: 6 and a scale per axis */
    int attr_count;
    clrun_tensor_type out; /* from infer */
    void *result;          /* the output read back (malloc'd) */
} node;

static clrun__op_call call_of(node *n)
{
    clrun__op_call call = {n->in, n->input_count, &n->out, 1, n->attrs, n->attr_count, 0};
    return call;
}

static clrun_status infer(node *n, char *err, size_t size)
{
    const clrun__op *op = clrun__op_find(n->op);
    if (op == NULL)
        fail_msg("no op '%s'", n->op);
    clrun__op_call call = call_of(n);
    err[0] = '\0';
    return op->infer(&call, &n->out, err, size);
}

static cl_mem buffer(size_t size, const void *data)
{
    cl_int e;
    cl_mem m = clCreateBuffer(clrun_context_cl(ctx),
                              CL_MEM_READ_WRITE | (data ? CL_MEM_COPY_HOST_PTR : 0), size,
                              (void *)data, &e);
    assert_int_equal(e, CL_SUCCESS);
    return m;
}

/* Runs the node once into n->result; in place, input 0's buffer is the output's too. */
static void run_node(node *n, bool in_place)
{
    char err[512];
    if (infer(n, err, sizeof err) != CLRUN_OK)
        fail_msg("%s refused: %s", n->op, err);
    const clrun__op *op = clrun__op_find(n->op);
    const clrun__op_kernels *kernels = clrun__op_kernels_find(op);
    assert_non_null(kernels);
    clrun__op_call call = call_of(n);
    void *state = NULL;
    if (kernels->prepare(ctx, op, &call, &state) != CLRUN_OK)
        fail_msg("%s prepare: %s", n->op, clrun_last_error(ctx));
    if (strcmp(n->op, "resize") == 0) /* its state is a clrun__kernel_state */
        assert_int_equal(clGetKernelInfo(((clrun__kernel_state *)state)->kernel, CL_KERNEL_FUNCTION_NAME,
                                         sizeof last_resize_kernel, last_resize_kernel, NULL),
                         CL_SUCCESS);
    cl_mem in[4], out;
    for (int i = 0; i < n->input_count; i++)
        in[i] = buffer(bytes_of(&n->in[i]), n->data[i]);
    size_t size = bytes_of(&n->out);
    if (in_place) {
        assert_int_equal(size, bytes_of(&n->in[0]));
        out = in[0];
    } else {
        out = buffer(size, NULL);
        /* Poison, so a kernel that writes nothing cannot pass. */
        const cl_uchar poison = 0xA5;
        assert_int_equal(clEnqueueFillBuffer(clrun_context_queue(ctx), out, &poison, 1, 0, size,
                                             0, NULL, NULL), CL_SUCCESS);
    }
    cl_event done = NULL;
    if (kernels->enqueue(ctx, state, &call, in, &out, 0, NULL, &done) != CLRUN_OK)
        fail_msg("%s enqueue: %s", n->op, clrun_last_error(ctx));
    n->result = malloc(size);
    assert_int_equal(clEnqueueReadBuffer(clrun_context_queue(ctx), out, CL_TRUE, 0, size,
                                         n->result, 1, &done, NULL), CL_SUCCESS);
    clReleaseEvent(done);
    kernels->release(state);
    for (int i = 0; i < n->input_count; i++)
        clReleaseMemObject(in[i]);
    if (!in_place)
        clReleaseMemObject(out);
}

static void node_free(node *n)
{
    free(n->result);
    n->result = NULL;
}

static void expect_type(const node *n, clrun_dtype dtype, const char *dims)
{
    clrun_tensor_type want = type(dtype, dims);
    char got_s[CLRUN__TYPE_TEXT], want_s[CLRUN__TYPE_TEXT];
    clrun__type_format(&n->out, got_s, sizeof got_s);
    clrun__type_format(&want, want_s, sizeof want_s);
    if (strcmp(got_s, want_s) != 0)
        fail_msg("%s: output %s, expected %s", n->op, got_s, want_s);
}

/* The result's bytes equal ref's. */
static void expect_bytes(const node *n, const void *ref)
{
    size_t size = clrun_dtype_size(n->out.dtype), count = (size_t)clrun_tensor_elements(&n->out);
    const unsigned char *got = n->result, *want = ref;
    char s[160];
    for (size_t i = 0; i < count; i++)
        if (memcmp(got + i * size, want + i * size, size) != 0) {
            uint64_t g = 0, w = 0;
            memcpy(&g, got + i * size, size);
            memcpy(&w, want + i * size, size);
            fail_msg("%s -> %s, seed %llu: element %zu is 0x%llx, reference 0x%llx", n->op,
                     clrun__type_format(&n->out, s, sizeof s), (unsigned long long)current_seed,
                     i, (unsigned long long)g, (unsigned long long)w);
        }
}

/* infer must refuse n with a message containing every fragment (NULL-terminated). */
static void expect_refusal(node *n, ...)
{
    char err[512];
    clrun_status s = infer(n, err, sizeof err);
    if (s != CLRUN_ERROR_INVALID_GRAPH)
        fail_msg("%s: expected a refusal, got %d (%s)", n->op, s, err);
    va_list ap;
    va_start(ap, n);
    for (const char *f = va_arg(ap, const char *); f; f = va_arg(ap, const char *))
        if (strstr(err, f) == NULL)
            fail_msg("%s: message \"%s\" lacks \"%s\"", n->op, err, f);
    va_end(ap);
}

/* Runs a one-input node on random data of its input type and checks it against `ref`, which
 * computes the reference from the input bytes. */
typedef void (*reference_fn)(const node *n, const void *x, void *out);

static void check_moves(node *n, reference_fn ref, const char *out_dims, uint64_t seed)
{
    current_seed = seed;
    void *x = random_bytes(bytes_of(&n->in[0]), seed);
    n->data[0] = x;
    run_node(n, false);
    if (out_dims)
        expect_type(n, n->in[0].dtype, out_dims);
    void *want = malloc(bytes_of(&n->out) + 8);
    ref(n, x, want);
    expect_bytes(n, want);
    free(x), free(want), node_free(n);
}

/* ---- transpose, reshape, concat ---------------------------------------------------------- */

static void transpose_ref(const node *n, const void *x, void *out)
{
    ref_shape s = ref_shape_of(&n->in[0]);
    lref_transpose(clrun_dtype_size(n->in[0].dtype), &s, x, n->attrs[0].ints, out);
}

static void transpose_moves_every_dtype(void **state)
{
    (void)state;
    for (size_t t = 0; t < DTYPE_COUNT; t++) {
        node a = {.op = "transpose", .input_count = 1, .in = {type(every_dtype[t], "2,3,4")},
                  .attrs = {INTS("perm", 2, 0, 1)}, .attr_count = 1};
        check_moves(&a, transpose_ref, "4,2,3", 100 + t);
        node b = {.op = "transpose", .input_count = 1,
                  .in = {type(every_dtype[t], "2,1,3,2,5,3")},
                  .attrs = {INTS("perm", 0, 1, 4, 2, 5, 3)}, .attr_count = 1};
        check_moves(&b, transpose_ref, "2,1,5,3,3,2", 110 + t); /* PixelShuffle's */
        node c = {.op = "transpose", .input_count = 1, .in = {type(every_dtype[t], "37,65")},
                  .attrs = {INTS("perm", 1, 0)}, .attr_count = 1};
        check_moves(&c, transpose_ref, "65,37", 120 + t);
        /* splitting attention heads: the innermost axis stays, run copies over two dims */
        node d = {.op = "transpose", .input_count = 1, .in = {type(every_dtype[t], "5,7,40")},
                  .attrs = {INTS("perm", 1, 0, 2)}, .attr_count = 1};
        check_moves(&d, transpose_ref, "7,5,40", 130 + t);
        /* ranks 7 and 8 (CLRUN_MAX_DIMS): no two axes stay neighbours, so none merge */
        node e = {.op = "transpose", .input_count = 1, .in = {type(every_dtype[t], "3,2,2,3,1,2,2")},
                  .attrs = {INTS("perm", 6, 0, 5, 1, 4, 2, 3)}, .attr_count = 1};
        check_moves(&e, transpose_ref, "2,3,2,2,1,2,3", 140 + t);
        node f = {.op = "transpose", .input_count = 1,
                  .in = {type(every_dtype[t], "2,3,1,2,3,2,1,2")},
                  .attrs = {INTS("perm", 7, 5, 3, 1, 0, 2, 4, 6)}, .attr_count = 1};
        check_moves(&f, transpose_ref, "2,2,2,3,2,1,3,1", 150 + t);
    }
}

static void identity_ref(const node *n, const void *x, void *out)
{
    memcpy(out, x, bytes_of(&n->in[0]));
}

static void reshape_copies_every_dtype(void **state)
{
    (void)state;
    for (size_t t = 0; t < DTYPE_COUNT; t++) {
        node n = {.op = "reshape", .input_count = 1, .in = {type(every_dtype[t], "3,5,7")},
                  .attrs = {INTS("shape", 7, -1)}, .attr_count = 1};
        check_moves(&n, identity_ref, "7,15", 200 + t);
    }
}

static void concat_joins_every_dtype_and_many_inputs(void **state)
{
    (void)state;
    for (size_t t = 0; t < DTYPE_COUNT; t++) {
        clrun_dtype dt = every_dtype[t];
        size_t size = clrun_dtype_size(dt);
        current_seed = 300 + t;
        /* 20 inputs of [2, k, 3] along axis 1, and one input alone. */
        for (int count = 1; count <= 20; count += 19) {
            node n = {.op = "concat", .input_count = 0, .attrs = {attr_int("axis", -2)},
                      .attr_count = 1};
            clrun_tensor_type types[20];
            void *parts[20];
            int64_t total = 0;
            for (int i = 0; i < count; i++) {
                char dims[32];
                snprintf(dims, sizeof dims, "2,%d,3", 1 + i % 4);
                types[i] = type(dt, dims);
                parts[i] = random_bytes(bytes_of(&types[i]), current_seed * 100 + (uint64_t)i);
                total += types[i].shape[1];
            }
            /* The node struct holds 4 inputs; run through a call of its own. */
            const clrun__op *op = clrun__op_find("concat");
            clrun_tensor_type out;
            clrun__op_call call = {types, count, &out, 1, n.attrs, 1, 0};
            char err[256];
            if (op->infer(&call, &out, err, sizeof err) != CLRUN_OK)
                fail_msg("concat refused: %s", err);
            assert_int_equal(out.shape[1], total);
            const clrun__op_kernels *k = clrun__op_kernels_find(op);
            void *st = NULL;
            assert_int_equal(k->prepare(ctx, op, &call, &st), CLRUN_OK);
            cl_mem in[20], y = buffer(bytes_of(&out), NULL);
            for (int i = 0; i < count; i++)
                in[i] = buffer(bytes_of(&types[i]), parts[i]);
            cl_event done = NULL;
            assert_int_equal(k->enqueue(ctx, st, &call, in, &y, 0, NULL, &done), CLRUN_OK);
            unsigned char *got = malloc(bytes_of(&out)), *want = malloc(bytes_of(&out));
            assert_int_equal(clEnqueueReadBuffer(clrun_context_queue(ctx), y, CL_TRUE, 0,
                                                 bytes_of(&out), got, 1, &done, NULL),
                             CL_SUCCESS);
            clReleaseEvent(done);
            /* Reference: row by row, each input's block in turn. */
            size_t at = 0;
            for (int64_t row = 0; row < 2; row++)
                for (int i = 0; i < count; i++) {
                    size_t block = (size_t)types[i].shape[1] * 3 * size;
                    memcpy(want + at, (char *)parts[i] + (size_t)row * block, block);
                    at += block;
                }
            assert_memory_equal(got, want, bytes_of(&out));
            k->release(st);
            for (int i = 0; i < count; i++)
                clReleaseMemObject(in[i]), free(parts[i]);
            clReleaseMemObject(y);
            free(got), free(want);
        }
    }
}

/* Concat of three inputs at ranks 7 and 8 (CLRUN_MAX_DIMS), along an inner and an outer axis:
 * the reference copies, for every row of the dims before the axis, each input's block. */
static void concat_at_ranks_7_and_8(void **state)
{
    (void)state;
    static const struct { const char *dims[3]; int axis; const char *out; } cases[] = {
        {{"2,1,2,3,1,2,2", "2,1,2,3,1,1,2", "2,1,2,3,1,3,2"}, 5, "2,1,2,3,1,6,2"},
        {{"2,3,1,2,2,1,2,2", "2,3,1,2,2,1,1,2", "2,3,1,2,2,1,3,2"}, -2, "2,3,1,2,2,1,6,2"},
        {{"1,2,2,1,2,3,1,2", "2,2,2,1,2,3,1,2", "1,2,2,1,2,3,1,2"}, 0, "4,2,2,1,2,3,1,2"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        clrun_dtype dt = every_dtype[c % DTYPE_COUNT];
        current_seed = 350 + c;
        node n = {.op = "concat", .input_count = 3, .attrs = {attr_int("axis", cases[c].axis)},
                  .attr_count = 1};
        void *parts[3];
        for (int i = 0; i < 3; i++) {
            n.in[i] = type(dt, cases[c].dims[i]);
            parts[i] = random_bytes(bytes_of(&n.in[i]), current_seed * 10 + (uint64_t)i);
            n.data[i] = parts[i];
        }
        run_node(&n, false);
        expect_type(&n, dt, cases[c].out);
        int axis = cases[c].axis < 0 ? cases[c].axis + n.in[0].rank : cases[c].axis;
        int64_t rows = 1;
        for (int d = 0; d < axis; d++)
            rows *= n.in[0].shape[d];
        unsigned char *want = malloc(bytes_of(&n.out) + 8);
        size_t at = 0;
        for (int64_t row = 0; row < rows; row++)
            for (int i = 0; i < 3; i++) {
                size_t block = bytes_of(&n.in[i]) / (size_t)rows;
                memcpy(want + at, (char *)parts[i] + (size_t)row * block, block);
                at += block;
            }
        assert_int_equal(at, bytes_of(&n.out));
        expect_bytes(&n, want);
        for (int i = 0; i < 3; i++)
            free(parts[i]);
        free(want), node_free(&n);
    }
}

/* ---- slice and split --------------------------------------------------------------------- */

typedef struct slice_case {
    const char *dims;
    int n;
    int64_t starts[CLRUN_MAX_DIMS], ends[CLRUN_MAX_DIMS], axes[CLRUN_MAX_DIMS], steps[CLRUN_MAX_DIMS];
    bool axes_given, steps_given;
    const char *out;
} slice_case;

static void check_slice(const slice_case *c, clrun_dtype dtype, uint64_t seed)
{
    current_seed = seed;
    node n = {.op = "slice", .input_count = 1, .in = {type(dtype, c->dims)}};
    n.attrs[n.attr_count++] = attr_ints("starts", c->n, c->starts);
    n.attrs[n.attr_count++] = attr_ints("ends", c->n, c->ends);
    if (c->axes_given)
        n.attrs[n.attr_count++] = attr_ints("axes", c->n, c->axes);
    if (c->steps_given)
        n.attrs[n.attr_count++] = attr_ints("steps", c->n, c->steps);
    void *x = random_bytes(bytes_of(&n.in[0]), seed);
    n.data[0] = x;
    run_node(&n, false);
    expect_type(&n, dtype, c->out);
    ref_shape xs = ref_shape_of(&n.in[0]), ys;
    void *want = malloc(bytes_of(&n.out) + 8);
    assert_true(lref_slice(clrun_dtype_size(dtype), &xs, x, c->n, c->starts, c->ends,
                           c->axes_given ? c->axes : NULL, c->steps_given ? c->steps : NULL, &ys,
                           want));
    expect_bytes(&n, want);
    free(x), free(want), node_free(&n);
}

static void slice_follows_onnx_clamping_and_steps(void **state)
{
    (void)state;
    const slice_case cases[] = {
        /* the suite's test_slice, _default_axes, _negative_axes, _end_out_of_bounds, _neg,
         * _neg_steps */
        {"20,10,5", 2, {0, 0}, {3, 10}, {0, 1}, {1, 1}, true, true, "3,10,5"},
        {"20,10,5", 3, {0, 0, 3}, {20, 10, 4}, {0}, {0}, false, false, "20,10,1"},
        {"20,10,5", 3, {0, 0, 3}, {20, 10, 4}, {0, -2, -1}, {0}, true, false, "20,10,1"},
        {"20,10,5", 1, {1}, {1000}, {1}, {1}, true, true, "20,9,5"},
        {"20,10,5", 1, {0}, {-1}, {1}, {1}, true, true, "20,9,5"},
        {"20,10,5", 3, {20, 10, 4}, {0, 0, 1}, {0, 1, 2}, {-1, -3, -2}, true, true, "19,3,2"},
        /* PyTorch's "to the end" and "from the end" sentinels, both directions */
        {"7,9", 2, {INT64_MIN, 2}, {INT64_MAX, INT64_MAX}, {0, 1}, {1, 3}, true, true, "7,3"},
        {"7,9", 1, {INT64_MAX}, {INT64_MIN}, {1}, {-1}, true, true, "7,9"},
        {"7,9", 1, {-1}, {-1000}, {0}, {-2}, true, true, "4,9"},
        /* a step longer than the axis; a start before it */
        {"7,9", 1, {2}, {9}, {1}, {INT64_MAX}, true, true, "7,1"},
        {"7,9", 1, {-100}, {3}, {0}, {1}, true, true, "3,9"},
        /* a long contiguous run (row copies) and a 6-D slice */
        {"3,1000", 1, {5}, {900}, {1}, {1}, true, true, "3,895"},
        /* runs over two outer dims, one of them walked backwards */
        {"4,10,40", 2, {3, 2}, {-5, 8}, {0, 1}, {-1, 1}, true, true, "4,6,40"},
        {"2,3,2,3,2,3", 3, {1, 0, -1}, {3, 2, -4}, {1, 3, 5}, {1, 1, -1}, true, true,
         "2,2,2,2,2,3"},
        /* ranks 7 and 8: every other axis cut, one of them backwards */
        {"3,2,3,2,3,2,3", 2, {0, 2}, {3, 0}, {0, 6}, {2, -1}, true, true, "2,2,3,2,3,2,2"},
        {"2,3,2,3,2,3,2,3", 4, {1, 0, -1, 1}, {2, 3, -4, 3}, {1, 3, 5, 7}, {1, 2, -1, 1}, true,
         true, "2,1,2,2,2,3,2,2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_slice(&cases[i], every_dtype[i % DTYPE_COUNT], 400 + i);
}

static void check_split(clrun_dtype dtype, const char *dims, int axis, int parts,
                        const int64_t *sizes, bool sizes_given, uint64_t seed)
{
    current_seed = seed;
    clrun_tensor_type t = type(dtype, dims);
    int a = axis < 0 ? axis + t.rank : axis;
    int64_t equal[16];
    for (int p = 0; p < parts; p++)
        equal[p] = t.shape[a] / parts;
    void *x = random_bytes(bytes_of(&t), seed);
    for (int index = 0; index < parts; index++) {
        node n = {.op = "split", .input_count = 1, .in = {t}, .data = {x}};
        n.attrs[n.attr_count++] = attr_int("axis", axis);
        n.attrs[n.attr_count++] = attr_int("index", index);
        if (sizes_given)
            n.attrs[n.attr_count++] = attr_ints("split", parts, sizes);
        else
            n.attrs[n.attr_count++] = attr_int("parts", parts);
        run_node(&n, false);
        void *want = malloc(bytes_of(&n.out) + 8);
        ref_shape xs = ref_shape_of(&t);
        lref_split(clrun_dtype_size(dtype), &xs, x, a, parts, sizes_given ? sizes : equal, index,
                   want);
        assert_int_equal(n.out.shape[a], sizes_given ? sizes[index] : equal[index]);
        expect_bytes(&n, want);
        free(want), node_free(&n);
    }
    free(x);
}

static void split_gives_each_part(void **state)
{
    (void)state;
    const int64_t two_four[2] = {2, 4}, odd[3] = {1, 5, 34};
    check_split(CLRUN_F32, "6", 0, 3, NULL, false, 500);         /* test_split_equal_parts_1d */
    check_split(CLRUN_F32, "2,6", 1, 2, NULL, false, 501);       /* _equal_parts_2d */
    check_split(CLRUN_I64, "2,6", -1, 2, two_four, true, 502);   /* _variable_parts_2d */
    check_split(CLRUN_BOOL, "5,40", 1, 3, odd, true, 503);
    check_split(CLRUN_F16, "4,3,2", 0, 4, NULL, false, 504);
}

/* ---- expand, tile, depth_to_space, space_to_depth ---------------------------------------- */

static void expand_ref(const node *n, const void *x, void *out)
{
    ref_shape xs = ref_shape_of(&n->in[0]), ys = ref_shape_of(&n->out);
    lref_expand(clrun_dtype_size(n->in[0].dtype), &xs, x, &ys, out);
}

static void expand_broadcasts_to_a_shape(void **state)
{
    (void)state;
    for (size_t t = 0; t < DTYPE_COUNT; t++) {
        clrun_dtype dt = every_dtype[t];
        node a = {.op = "expand", .input_count = 1, .in = {type(dt, "3,1")},
                  .attrs = {INTS("shape", 2, 1, 6)}, .attr_count = 1};
        check_moves(&a, expand_ref, "2,3,6", 600 + t); /* test_expand_dim_changed */
        node b = {.op = "expand", .input_count = 1, .in = {type(dt, "3,1")},
                  .attrs = {INTS("shape", 3, 4)}, .attr_count = 1};
        check_moves(&b, expand_ref, "3,4", 610 + t);
        node c = {.op = "expand", .input_count = 1, .in = {type(dt, "1,3,1")},
                  .attrs = {INTS("shape", 5)}, .attr_count = 1};
        check_moves(&c, expand_ref, "1,3,5", 620 + t); /* x keeps its larger dims */
        node d = {.op = "expand", .input_count = 1, .in = {type(dt, "")},
                  .attrs = {INTS("shape", 2, 70)}, .attr_count = 1};
        check_moves(&d, expand_ref, "2,70", 630 + t);
        node e = {.op = "expand", .input_count = 1, .in = {type(dt, "1,2,1,3")},
                  .attrs = {INTS("shape", 2, 1, 3, 2, 2, 1, 3)}, .attr_count = 1};
        check_moves(&e, expand_ref, "2,1,3,2,2,1,3", 640 + t); /* rank 7 */
        node f = {.op = "expand", .input_count = 1, .in = {type(dt, "3,1,2,1")},
                  .attrs = {INTS("shape", 2, 1, 2, 1, 3, 2, 2, 4)}, .attr_count = 1};
        check_moves(&f, expand_ref, "2,1,2,1,3,2,2,4", 650 + t); /* rank 8 */
    }
}

static void tile_ref(const node *n, const void *x, void *out)
{
    ref_shape xs = ref_shape_of(&n->in[0]);
    lref_tile(clrun_dtype_size(n->in[0].dtype), &xs, x, n->attrs[0].ints, out);
}

static void tile_repeats_every_axis(void **state)
{
    (void)state;
    node a = {.op = "tile", .input_count = 1, .in = {type(CLRUN_F32, "2,3,4,5")},
              .attrs = {INTS("repeats", 7, 6, 4, 2)}, .attr_count = 1};
    check_moves(&a, tile_ref, "14,18,16,10", 700); /* test_tile */
    node b = {.op = "tile", .input_count = 1, .in = {type(CLRUN_I64, "2,2")},
              .attrs = {INTS("repeats", 2, 2)}, .attr_count = 1};
    check_moves(&b, tile_ref, "4,4", 701);
    node c = {.op = "tile", .input_count = 1, .in = {type(CLRUN_BOOL, "1,2,3,4")},
              .attrs = {INTS("repeats", 3, 1, 1, 40)}, .attr_count = 1};
    check_moves(&c, tile_ref, "3,2,3,160", 702);
    node d = {.op = "tile", .input_count = 1, .in = {type(CLRUN_F16, "3,1,2,1,2,1")},
              .attrs = {INTS("repeats", 2, 3, 1, 2, 2, 5)}, .attr_count = 1};
    check_moves(&d, tile_ref, "6,3,2,2,4,5", 703);
    /* ranks 7 and 8: the view has twice the rank, 16 at most */
    node e = {.op = "tile", .input_count = 1, .in = {type(CLRUN_I32, "3,1,2,1,2,1,2")},
              .attrs = {INTS("repeats", 2, 3, 1, 2, 1, 2, 1)}, .attr_count = 1};
    check_moves(&e, tile_ref, "6,3,2,2,2,2,2", 704);
    node f = {.op = "tile", .input_count = 1, .in = {type(CLRUN_F64, "2,1,2,1,2,1,2,1")},
              .attrs = {INTS("repeats", 1, 2, 1, 3, 2, 1, 1, 2)}, .attr_count = 1};
    check_moves(&f, tile_ref, "2,2,2,3,4,1,2,2", 705);
}

static void depth_to_space_ref(const node *n, const void *x, void *out)
{
    ref_shape xs = ref_shape_of(&n->in[0]);
    bool crd = n->attr_count > 1 && n->attrs[1].i == 1;
    lref_depth_to_space(clrun_dtype_size(n->in[0].dtype), &xs, x, n->attrs[0].i, crd, out);
}

static void space_to_depth_ref(const node *n, const void *x, void *out)
{
    ref_shape xs = ref_shape_of(&n->in[0]);
    lref_space_to_depth(clrun_dtype_size(n->in[0].dtype), &xs, x, n->attrs[0].i, out);
}

static void depth_and_space_rearrange_blocks(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        node a = {.op = "depth_to_space", .input_count = 1, .in = {type(CLRUN_F32, "2,8,3,3")},
                  .attrs = {attr_int("blocksize", 2), attr_int("mode", mode)}, .attr_count = 2};
        check_moves(&a, depth_to_space_ref, "2,2,6,6", 800 + (uint64_t)mode);
        node b = {.op = "depth_to_space", .input_count = 1, .in = {type(CLRUN_I64, "1,18,2,5")},
                  .attrs = {attr_int("blocksize", 3), attr_int("mode", mode)}, .attr_count = 2};
        check_moves(&b, depth_to_space_ref, "1,2,6,15", 810 + (uint64_t)mode);
    }
    node c = {.op = "depth_to_space", .input_count = 1, .in = {type(CLRUN_BOOL, "1,4,2,3")},
              .attrs = {attr_int("blocksize", 2)}, .attr_count = 1}; /* DCR by default */
    check_moves(&c, depth_to_space_ref, "1,1,4,6", 820);
    node d = {.op = "space_to_depth", .input_count = 1, .in = {type(CLRUN_F32, "2,2,6,6")},
              .attrs = {attr_int("blocksize", 2)}, .attr_count = 1};
    check_moves(&d, space_to_depth_ref, "2,8,3,3", 830);
    node e = {.op = "space_to_depth", .input_count = 1, .in = {type(CLRUN_F16, "1,3,6,9")},
              .attrs = {attr_int("blocksize", 3)}, .attr_count = 1};
    check_moves(&e, space_to_depth_ref, "1,27,2,3", 831);
}

/* ---- gather and gather_elements ---------------------------------------------------------- */

static void check_gather(clrun_dtype dtype, const char *dims, int64_t axis, clrun_dtype index_type,
                         const char *index_dims, const int64_t *indices, const char *out_dims,
                         uint64_t seed)
{
    current_seed = seed;
    node n = {.op = "gather", .input_count = 2,
              .in = {type(dtype, dims), type(index_type, index_dims)},
              .attrs = {attr_int("axis", axis)}, .attr_count = 1};
    void *x = random_bytes(bytes_of(&n.in[0]), seed);
    size_t count = (size_t)clrun_tensor_elements(&n.in[1]);
    int64_t seen[64];
    void *idx = index_data(index_type, indices, count, seen);
    n.data[0] = x, n.data[1] = idx;
    run_node(&n, false);
    expect_type(&n, dtype, out_dims);
    ref_shape xs = ref_shape_of(&n.in[0]), is = ref_shape_of(&n.in[1]);
    void *want = malloc(bytes_of(&n.out) + 8);
    int a = (int)(axis < 0 ? axis + xs.rank : axis);
    lref_gather(clrun_dtype_size(dtype), &xs, x, &is, seen, a, true, want);
    expect_bytes(&n, want);
    free(x), free(idx), free(want), node_free(&n);
}

static void gather_takes_any_axis_and_negative_indices(void **state)
{
    (void)state;
    const int64_t three[3] = {0, 1, 3}, negative[3] = {0, -9, -10}, pair[2] = {0, 2};
    const int64_t outside[5] = {4, 5, -6, INT64_MAX, INT64_MIN}, one[1] = {-2};
    for (int i = 0; i < 2; i++) {
        clrun_dtype it = i ? CLRUN_I64 : CLRUN_I32;
        check_gather(CLRUN_F32, "5,4,3,2", 0, it, "3", three, "3,4,3,2", 900);   /* test_gather_0 */
        check_gather(CLRUN_F32, "5,4,3,2", 1, it, "3", three, "5,3,3,2", 901);   /* test_gather_1 */
        check_gather(CLRUN_F32, "3,3", 1, it, "1,2", pair, "3,1,2", 902);        /* _2d_indices */
        check_gather(CLRUN_F32, "10", 0, it, "3", negative, "3", 903);           /* _negative */
        check_gather(CLRUN_I64, "2,5,70", -2, it, "5", outside, "2,5,70", 904);  /* zeros */
        check_gather(CLRUN_BOOL, "4,6", 1, it, "", one, "4", 905);               /* scalar index */
        check_gather(CLRUN_F16, "3,4,5", 2, it, "2,1", pair, "3,4,2,1", 906);
        check_gather(CLRUN_F64, "7", 0, it, "", one, "", 907);                   /* rank 0 out */
        check_gather(CLRUN_F32, "2,3,2,3,2,2,2", 3, it, "2", pair, "2,3,2,2,2,2,2", 908);
        check_gather(CLRUN_I32, "2,2,3,2,2,3,2", 2, it, "2,1", pair, "2,2,2,1,2,2,3,2", 909);
    }
}

static void check_gather_elements(clrun_dtype dtype, const char *dims, int64_t axis,
                                  clrun_dtype index_type, const char *index_dims,
                                  const int64_t *indices, uint64_t seed)
{
    current_seed = seed;
    node n = {.op = "gather_elements", .input_count = 2,
              .in = {type(dtype, dims), type(index_type, index_dims)},
              .attrs = {attr_int("axis", axis)}, .attr_count = 1};
    void *x = random_bytes(bytes_of(&n.in[0]), seed);
    size_t count = (size_t)clrun_tensor_elements(&n.in[1]);
    int64_t seen[64];
    void *idx = index_data(index_type, indices, count, seen);
    n.data[0] = x, n.data[1] = idx;
    run_node(&n, false);
    expect_type(&n, dtype, index_dims);
    ref_shape xs = ref_shape_of(&n.in[0]), is = ref_shape_of(&n.in[1]);
    void *want = malloc(bytes_of(&n.out) + 8);
    lref_gather_elements(clrun_dtype_size(dtype), &xs, x, &is, seen,
                         (int)(axis < 0 ? axis + xs.rank : axis), want);
    expect_bytes(&n, want);
    free(x), free(idx), free(want), node_free(&n);
}

static void gather_elements_picks_along_an_axis(void **state)
{
    (void)state;
    const int64_t e0[4] = {0, 0, 1, 0}, e1[6] = {1, 2, 0, 2, 0, 0}, en[6] = {-1, -2, 0, -2, 0, 0};
    int64_t many[2 * 3 * 4];
    for (int i = 0; i < 24; i++)
        many[i] = (i * 7) % 11 - 5; /* -5..5 on an axis of 5: some outside */
    for (int i = 0; i < 2; i++) {
        clrun_dtype it = i ? CLRUN_I64 : CLRUN_I32;
        check_gather_elements(CLRUN_F32, "2,2", 1, it, "2,2", e0, 1000);  /* _elements_0 */
        check_gather_elements(CLRUN_F32, "3,3", 0, it, "2,3", e1, 1001);  /* _elements_1 */
        check_gather_elements(CLRUN_F32, "3,3", 0, it, "2,3", en, 1002);  /* _negative_indices */
        check_gather_elements(CLRUN_F64, "3,5,6", 1, it, "2,3,4", many, 1003);
        check_gather_elements(CLRUN_BOOL, "2,4,5", -1, it, "2,3,4", many, 1004);
        check_gather_elements(CLRUN_F32, "2,2,2,3,2,2,2,2", 3, it, "1,2,1,2,1,2,1,2", many, 1005);
        check_gather_elements(CLRUN_I64, "2,1,2,5,2,1,2", -4, it, "1,1,2,3,2,1,2", many, 1006);
    }
}

/* ---- pad --------------------------------------------------------------------------------- */

static void check_pad(clrun_dtype dtype, const char *dims, int rank, const int64_t *pads,
                      int mode, double value, const char *out_dims, uint64_t seed)
{
    current_seed = seed;
    node n = {.op = "pad", .input_count = 1, .in = {type(dtype, dims)},
              .attrs = {attr_ints("pads", 2 * rank, pads), attr_int("mode", mode),
                        attr_float("value", value)},
              .attr_count = 3};
    void *x = random_bytes(bytes_of(&n.in[0]), seed);
    n.data[0] = x;
    run_node(&n, false);
    expect_type(&n, dtype, out_dims);
    /* The constant's bytes, written independently of the library. */
    unsigned char bits[8] = {0};
    float f = (float)value;
    int32_t i32 = (int32_t)value;
    int64_t i64 = (int64_t)value;
    uint16_t h = value == 0.5 ? 0x3800 : value == -2 ? 0xc000 : 0;
    switch (dtype) {
    case CLRUN_F32: memcpy(bits, &f, 4); break;
    case CLRUN_I32: memcpy(bits, &i32, 4); break;
    case CLRUN_I64: memcpy(bits, &i64, 8); break;
    case CLRUN_F64: memcpy(bits, &value, 8); break;
    case CLRUN_BOOL: bits[0] = value != 0; break;
    case CLRUN_F16: memcpy(bits, &h, 2); break;
    case CLRUN_BF16: { uint16_t b = value == 0.5 ? 0x3f00 : value == -2 ? 0xc000 : 0; memcpy(bits, &b, 2); break; }
    case CLRUN_I8:
    case CLRUN_U8: bits[0] = (unsigned char)i32; break;
    case CLRUN_I16:
    case CLRUN_U16: { uint16_t v = (uint16_t)i32; memcpy(bits, &v, 2); break; }
    case CLRUN_U32: memcpy(bits, &i32, 4); break;
    case CLRUN_U64: memcpy(bits, &i64, 8); break;
    }
    ref_shape xs = ref_shape_of(&n.in[0]);
    void *want = malloc(bytes_of(&n.out) + 8);
    lref_pad(clrun_dtype_size(dtype), &xs, x, pads, mode, bits, want);
    expect_bytes(&n, want);
    free(x), free(want), node_free(&n);
}

static void pad_in_every_mode(void **state)
{
    (void)state;
    const int64_t suite_constant[8] = {0, 0, 1, 3, 0, 0, 2, 4};
    const int64_t suite_edge[8] = {0, 0, 1, 1, 0, 0, 1, 1};
    const int64_t torch2d[8] = {0, 0, 3, 1, 0, 0, 4, 2};
    const int64_t wide[4] = {7, 9, 5, 11}, crop[4] = {-1, 2, 0, -3}, single[2] = {3, 4};
    const int64_t rank7[14] = {0, 1, 0, 1, 0, 0, 2, 1, 0, 0, 0, 1, 0, 0};
    const int64_t rank8[16] = {1, 0, 1, 0, 0, 1, 0, 1, 0, 0, 1, 2, 0, 0, 0, 1};
    /* test_constant_pad, test_edge_pad, test_reflect_pad, pytorch's *Pad2d */
    check_pad(CLRUN_F32, "1,3,4,5", 4, suite_constant, 0, 1.2, "1,3,7,12", 1100);
    check_pad(CLRUN_I32, "1,3,4,5", 4, suite_edge, 2, 0, "1,3,6,7", 1101);
    check_pad(CLRUN_I32, "1,3,4,5", 4, suite_edge, 1, 0, "1,3,6,7", 1102);
    check_pad(CLRUN_F32, "2,3,8,8", 4, torch2d, 1, 0, "2,3,15,11", 1103);
    check_pad(CLRUN_F32, "2,3,4,4", 4, torch2d, 2, 0, "2,3,11,7", 1104);
    check_pad(CLRUN_F32, "2,3,4,4", 4, torch2d, 0, 2, "2,3,11,7", 1105);
    /* pads wider than the axis (periodic reflection, as numpy), crops, one element */
    for (int mode = 0; mode < 3; mode++) {
        check_pad(CLRUN_I64, "3,4", 2, wide, mode, -7, "15,24", 1110 + (uint64_t)mode);
        check_pad(CLRUN_F64, "3,6", 2, crop, mode, 0.5, "2,5", 1120 + (uint64_t)mode);
        check_pad(CLRUN_BOOL, "1", 1, single, mode, 1, "8", 1130 + (uint64_t)mode);
        check_pad(CLRUN_F16, "2,3", 2, wide, mode, -2, "14,23", 1140 + (uint64_t)mode);
        check_pad(CLRUN_U8, "3,4", 2, wide, mode, 200, "15,24", 1150 + (uint64_t)mode);
        check_pad(CLRUN_I16, "3,6", 2, crop, mode, -300, "2,5", 1160 + (uint64_t)mode);
        check_pad(CLRUN_F32, "2,3,1,2,2,1,3", 7, rank7, mode, 1.5, "3,4,1,3,3,1,5",
                  1170 + (uint64_t)mode);
        check_pad(CLRUN_I64, "2,1,2,3,1,2,1,2", 8, rank8, mode, -7, "3,1,4,5,1,3,1,4",
                  1180 + (uint64_t)mode);
    }
}

/* ---- trilu and cumsum -------------------------------------------------------------------- */

static void check_trilu(clrun_dtype dtype, const char *dims, bool upper, int64_t k, uint64_t seed)
{
    current_seed = seed;
    node n = {.op = "trilu", .input_count = 1, .in = {type(dtype, dims)},
              .attrs = {attr_int("upper", upper), attr_int("k", k)}, .attr_count = 2};
    void *x = random_bytes(bytes_of(&n.in[0]), seed);
    n.data[0] = x;
    ref_shape xs = ref_shape_of(&n.in[0]);
    void *want = malloc(bytes_of(&n.in[0]) + 8);
    lref_trilu(clrun_dtype_size(dtype), &xs, x, upper, k, want);
    for (int in_place = 0; in_place < 2; in_place++) {
        run_node(&n, in_place);
        expect_bytes(&n, want);
        node_free(&n);
    }
    free(x), free(want);
}

static void trilu_keeps_a_triangle(void **state)
{
    (void)state;
    const int64_t ks[] = {0, -1, 2, -7, 6, INT64_MAX, INT64_MIN};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        for (int upper = 0; upper < 2; upper++) {
            uint64_t seed = 1200 + 10 * i + (uint64_t)upper;
            check_trilu(CLRUN_I64, "4,5", upper, ks[i], seed);    /* test_tril*, test_triu* */
            check_trilu(CLRUN_F32, "2,3,3", upper, ks[i], seed);  /* _square */
            check_trilu(CLRUN_BOOL, "3,1,5", upper, ks[i], seed); /* _one_row */
            check_trilu(CLRUN_F16, "2,2,40,33", upper, ks[i], seed);
        }
}

static void check_cumsum(clrun_dtype dtype, const char *dims, int64_t axis, bool exclusive,
                         bool reverse, uint64_t seed)
{
    current_seed = seed;
    node n = {.op = "cumsum", .input_count = 1, .in = {type(dtype, dims)},
              .attrs = {attr_int("axis", axis), attr_int("exclusive", exclusive),
                        attr_int("reverse", reverse)},
              .attr_count = 3};
    size_t count = (size_t)clrun_tensor_elements(&n.in[0]);
    ref_shape xs = ref_shape_of(&n.in[0]);
    int a = (int)(axis < 0 ? axis + xs.rank : axis);
    void *x = random_bytes(bytes_of(&n.in[0]), seed), *want = malloc(bytes_of(&n.in[0]) + 8);
    double *values = malloc(count * sizeof *values), *sums = malloc(count * sizeof *sums);
    bool floats = dtype == CLRUN_F32 || dtype == CLRUN_F64;
    uint64_t state = seed;
    for (size_t i = 0; floats && i < count; i++) {
        values[i] = (double)(rng_next(&state) >> 11) / 9007199254740992.0 * 4 - 2;
        if (dtype == CLRUN_F32) {
            float f = (float)values[i];
            values[i] = f;
            memcpy((char *)x + 4 * i, &f, 4);
        } else {
            memcpy((char *)x + 8 * i, &values[i], 8);
        }
    }
    n.data[0] = x;
    if (floats)
        lref_cumsum_float(&xs, values, a, exclusive, reverse, sums);
    else
        lref_cumsum_int(clrun_dtype_size(dtype), &xs, x, a, exclusive, reverse, want);
    /* f32 sums a line in float, in order: after k terms of magnitude <= 2 it is off by at most
     * about k * 2^-24 * the partial sums' magnitude, well inside 1e-6 * (k * 2). */
    int64_t len = xs.dims[a];
    for (int in_place = 0; in_place < 2; in_place++) {
        run_node(&n, in_place);
        for (size_t i = 0; floats && i < count; i++) {
            double got = dtype == CLRUN_F32 ? (double)((float *)n.result)[i] : ((double *)n.result)[i];
            double bound = (dtype == CLRUN_F32 ? 1e-6 : 1e-14) * 2.0 * (double)len;
            if (!(fabs(got - sums[i]) <= bound))
                fail_msg("cumsum %s seed %llu: element %zu is %.17g, reference %.17g", dims,
                         (unsigned long long)seed, i, got, sums[i]);
        }
        if (!floats)
            expect_bytes(&n, want);
        node_free(&n);
    }
    free(x), free(want), free(values), free(sums);
}

static void cumsum_along_any_axis_both_ways(void **state)
{
    (void)state;
    const clrun_dtype dtypes[4] = {CLRUN_F32, CLRUN_F64, CLRUN_I32, CLRUN_I64};
    const bool fp64 = clrun_context_device(ctx)->fp64;
    for (int t = 0; t < 4; t++) {
        if (dtypes[t] == CLRUN_F64 && !fp64) {
            print_message("f64 cumsum not run: the device has no cl_khr_fp64\n");
            continue;
        }
        for (int flags = 0; flags < 4; flags++) {
            bool exclusive = flags & 1, reverse = flags & 2;
            uint64_t seed = 1300 + 10 * (uint64_t)t + (uint64_t)flags;
            check_cumsum(dtypes[t], "5", 0, exclusive, reverse, seed);       /* test_cumsum_1d* */
            check_cumsum(dtypes[t], "2,3", 0, exclusive, reverse, seed);     /* _2d_axis_0 */
            check_cumsum(dtypes[t], "2,3", -1, exclusive, reverse, seed);    /* _2d_negative */
            check_cumsum(dtypes[t], "3,300,7", 1, exclusive, reverse, seed);
        }
    }
}

/* f64 needs cl_khr_fp64: where the device has it cumsum runs, elsewhere prepare says why. */
static void cumsum_f64_runs_with_fp64_and_is_refused_without(void **state)
{
    (void)state;
    node n = {.op = "cumsum", .input_count = 1, .in = {type(CLRUN_F64, "4")},
              .attrs = {attr_int("axis", 0)}, .attr_count = 1};
    double x[4] = {1, 2, 3, 4.5};
    n.data[0] = x;
    if (clrun_context_device(ctx)->fp64) {
        run_node(&n, false);
        assert_true(((double *)n.result)[3] == 10.5);
        node_free(&n);
        return;
    }
    char err[256];
    assert_int_equal(infer(&n, err, sizeof err), CLRUN_OK);
    const clrun__op *op = clrun__op_find("cumsum");
    clrun__op_call call = call_of(&n);
    void *st = NULL;
    assert_int_not_equal(clrun__op_kernels_find(op)->prepare(ctx, op, &call, &st), CLRUN_OK);
    assert_non_null(strstr(clrun_last_error(ctx), "cl_khr_fp64"));
}

/* ---- resize ------------------------------------------------------------------------------ */

typedef struct resize_case {
    const char *in, *out;
    int mode, coordinate_mode, nearest_mode;
    double cubic_a;
    bool exclude_outside;
    double scales[CLRUN_MAX_DIMS]; /* 0: not given */
} resize_case;

/* The resize node of case c, its input of dtype (no data yet). */
static node resize_node(const resize_case *c, clrun_dtype dtype)
{
    node n = {.op = "resize", .input_count = 1, .in = {type(dtype, c->in)}};
    clrun_tensor_type out = type(dtype, c->out);
    n.attrs[n.attr_count++] = attr_ints("sizes", out.rank, out.shape);
    n.attrs[n.attr_count++] = attr_int("mode", c->mode);
    n.attrs[n.attr_count++] = attr_int("coordinate_transformation_mode", c->coordinate_mode);
    n.attrs[n.attr_count++] = attr_int("nearest_mode", c->nearest_mode);
    n.attrs[n.attr_count++] = attr_float("cubic_coeff_a", c->cubic_a ? c->cubic_a : -0.75);
    n.attrs[n.attr_count++] = attr_int("exclude_outside", c->exclude_outside);
    static const char *const names[CLRUN_MAX_DIMS] = {"scale0", "scale1", "scale2", "scale3",
                                                      "scale4", "scale5", "scale6", "scale7"};
    for (int d = 0; d < out.rank; d++)
        if (c->scales[d] > 0)
            n.attrs[n.attr_count++] = attr_float(names[d], c->scales[d]);
    return n;
}

static void check_resize(const resize_case *c, clrun_dtype dtype, uint64_t seed)
{
    current_seed = seed;
    node n = resize_node(c, dtype);
    size_t count = (size_t)clrun_tensor_elements(&n.in[0]);
    void *x = random_bytes(bytes_of(&n.in[0]), seed);
    double *values = malloc(count * sizeof *values), max = 0;
    uint64_t state = seed;
    for (size_t i = 0; i < count; i++) {
        if (dtype == CLRUN_F32) {
            float f = (float)((double)(rng_next(&state) >> 40) / 16777216.0 * 20 - 10);
            memcpy((char *)x + 4 * i, &f, 4);
            values[i] = f;
        } else { /* i64: small values, read back exactly as doubles */
            int64_t v = (int64_t)(rng_next(&state) % 2001) - 1000;
            memcpy((char *)x + 8 * i, &v, 8);
            values[i] = (double)v;
        }
        max = fmax(max, fabs(values[i]));
    }
    n.data[0] = x;
    run_node(&n, false);
    expect_type(&n, dtype, c->out);
    ref_shape xs = ref_shape_of(&n.in[0]), ys = ref_shape_of(&n.out);
    lref_resize_params p = {c->mode, c->coordinate_mode, c->nearest_mode,
                            c->cubic_a ? c->cubic_a : -0.75, c->exclude_outside, {0}};
    memcpy(p.scales, c->scales, sizeof p.scales);
    double *want = malloc((size_t)ref_count(&ys) * sizeof *want);
    lref_resize(&xs, values, &ys, &p, want);
    /* nearest moves elements: exact. linear and cubic sum a few products in float (cubic
     * weights reach -0.2 and 1.2 per axis): within 1e-5 of the inputs' magnitude. */
    double tol = c->mode == CLRUN__RESIZE_NEAREST ? 0 : 1e-5 * max;
    for (int64_t i = 0; i < ref_count(&ys); i++) {
        double got = dtype == CLRUN_F32 ? (double)((float *)n.result)[i]
                                        : (double)((int64_t *)n.result)[i];
        if (!(fabs(got - want[i]) <= tol))
            fail_msg("resize %s -> %s mode %d coord %d nearest %d seed %llu: element %lld is "
                     "%.9g, reference %.9g", c->in, c->out, c->mode, c->coordinate_mode,
                     c->nearest_mode, (unsigned long long)seed, (long long)i, got, want[i]);
    }
    free(x), free(values), free(want), node_free(&n);
}

static void resize_nearest_in_every_rounding_and_coordinate_mode(void **state)
{
    (void)state;
    for (int coord = 0; coord < 5; coord++)
        for (int nearest = 0; nearest < 4; nearest++) {
            uint64_t seed = 1400 + 10 * (uint64_t)coord + (uint64_t)nearest;
            resize_case up = {"1,1,4,4", "1,1,8,8", 0, coord, nearest, 0, false, {0}};
            resize_case down = {"1,1,2,4", "1,1,1,3", 0, coord, nearest, 0, false, {0}};
            resize_case odd = {"2,3,5,7", "2,3,9,4", 0, coord, nearest, 0, false, {0}};
            resize_case scaled = {"1,1,2,2", "1,1,4,6", 0, coord, nearest, 0, false,
                                  {1, 1, 2, 3}};
            resize_case tiny = {"1,1,2,4", "1,1,1,2", 0, coord, nearest, 0, false,
                                {1, 1, 0.6f, 0.6f}};
            check_resize(&up, CLRUN_F32, seed);
            check_resize(&down, CLRUN_F32, seed);
            check_resize(&odd, CLRUN_I64, seed);
            check_resize(&scaled, CLRUN_F32, seed);
            check_resize(&tiny, CLRUN_F32, seed);
            resize_case rank8 = {"2,1,2,1,3,1,2,2", "1,2,3,1,2,2,3,1", 0, coord, nearest, 0,
                                 false, {0}};
            check_resize(&rank8, CLRUN_I64, seed);
        }
}

static void resize_linear_and_cubic_match_the_onnx_reference(void **state)
{
    (void)state;
    const resize_case cases[] = {
        /* the suite's linear cases */
        {"1,1,2,2", "1,1,4,4", 1, 0, 0, 0, false, {1, 1, 2, 2}},
        {"1,1,2,2", "1,1,4,4", 1, 2, 0, 0, false, {1, 1, 2, 2}},
        {"1,1,2,4", "1,1,1,2", 1, 0, 0, 0, false, {1, 1, 0.6f, 0.6f}},
        {"1,1,2,4", "1,1,1,2", 1, 2, 0, 0, false, {1, 1, 0.6f, 0.6f}},
        {"1,1,4,4", "1,1,3,1", 1, 3, 0, 0, false, {0}},
        /* the suite's cubic cases */
        {"1,1,4,4", "1,1,8,8", 2, 0, 0, 0, false, {1, 1, 2, 2}},
        {"1,1,4,4", "1,1,8,8", 2, 0, 0, -0.5, true, {1, 1, 2, 2}},
        {"1,1,4,4", "1,1,8,8", 2, 2, 0, 0, false, {1, 1, 2, 2}},
        {"1,1,4,4", "1,1,8,8", 2, 1, 0, 0, false, {1, 1, 2, 2}},
        {"1,1,4,4", "1,1,3,3", 2, 0, 0, 0, false, {1, 1, 0.8f, 0.8f}},
        {"1,1,4,4", "1,1,3,3", 2, 0, 0, -0.5, true, {1, 1, 0.8f, 0.8f}},
        {"1,1,4,4", "1,1,3,3", 2, 2, 0, 0, false, {1, 1, 0.8f, 0.8f}},
        {"1,1,4,4", "1,1,9,10", 2, 0, 0, 0, false, {0}},
        {"1,1,4,4", "1,1,3,3", 2, 0, 0, 0, false, {0}},
        /* every coordinate mode, odd sizes, 1-D, 3-D, 5-D, all axes resized */
        {"2,3,5,7", "2,3,11,3", 1, 0, 0, 0, false, {0}},
        {"2,3,5,7", "2,3,11,3", 1, 1, 0, 0, false, {0}},
        {"2,3,5,7", "2,3,11,3", 1, 3, 0, 0, false, {0}},
        {"2,3,5,7", "2,3,11,3", 1, 4, 0, 0, false, {0}},
        {"2,3,5,7", "2,3,11,3", 2, 3, 0, 0, true, {0}},
        {"9", "4", 1, 0, 0, 0, false, {0}},
        {"9", "20", 2, 2, 0, 0, false, {0}},
        {"3,4,5", "5,2,9", 1, 0, 0, 0, false, {0}},
        {"2,2,3,2,3", "1,3,5,3,2", 2, 1, 0, 0, false, {0}},
        {"1,1,3,1", "1,1,6,1", 1, 3, 0, 0, false, {0}},
        /* planes of several blocks of rows (a work-item per block on every device) */
        {"1,2,40,50", "1,2,70,90", 1, 0, 0, 0, false, {0}},
        /* ranks 7 and 8: scales of the last axes given (scale6, scale7) */
        {"2,1,2,1,3,1,2", "1,2,3,1,2,1,3", 1, 0, 0, 0, false, {0}},
        {"2,2,1,2,1,2,2,2", "3,1,2,3,1,2,3,1", 1, 0, 0, 0, false, {0}},
        {"1,2,1,1,1,1,2,2", "1,2,1,1,1,1,4,4", 2, 0, 0, 0, false, {1, 1, 1, 1, 1, 1, 2, 2}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_resize(&cases[i], CLRUN_F32, 1500 + i);
}

/* The interpolations' three kernels (the general one, the planes kernel and the linear planes
 * kernel) give the same bits wherever the faster applies, and each is chosen where it should
 * be: bilinear upsampling and downsampling of images (an ASPP head's 32 x 32 -> 256 x 256 among
 * them, in several blocks of rows), align_corners, cubic (planes, not linear) and a resize of a
 * leading axis (the general kernel only). */
static void resize_kernels_give_the_same_bits(void **state)
{
    (void)state;
    static const struct {
        resize_case c;
        const char *fastest;
    } cases[] = {
        {{"1,2,40,50", "1,2,70,90", 1, 0, 0, 0, false, {0}}, "clrun_resize_planes_linear_f32"},
        {{"1,3,32,32", "1,3,256,256", 1, 0, 0, 0, false, {0}}, "clrun_resize_planes_linear_f32"},
        {{"2,3,5,7", "2,3,11,3", 1, 1, 0, 0, false, {0}}, "clrun_resize_planes_linear_f32"},
        {{"1,1,9,9", "1,1,4,5", 1, 3, 0, 0, false, {0}}, "clrun_resize_planes_linear_f32"},
        {{"1,1,9,9", "1,1,4,3", 1, 3, 0, 0, false, {0}}, "clrun_resize_planes_f32"}, /* W: one tap */
        {{"3,4,5", "3,2,9", 1, 0, 0, 0, false, {0}}, "clrun_resize_planes_linear_f32"},
        {{"1,1,4,4", "1,1,9,10", 2, 0, 0, 0, false, {0}}, "clrun_resize_planes_f32"},
        {{"3,4,5", "5,2,9", 1, 0, 0, 0, false, {0}}, "clrun_resize_interp_f32"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const resize_case *c = &cases[i].c;
        unsigned char *bits[3] = {NULL, NULL, NULL};
        size_t size = 0;
        char chosen[3][64];
        for (int k = 2; k >= 0; k--) {
            clrun__resize_kernels = k;
            node n = resize_node(c, CLRUN_F32);
            float *x = malloc(bytes_of(&n.in[0]));
            assert_non_null(x);
            for (size_t e = 0; e < bytes_of(&n.in[0]) / 4; e++) /* finite, in [-10, 10) */
                x[e] = (float)((e * 2654435761u + i) % 2000) / 100.0f - 10.0f;
            n.data[0] = x;
            run_node(&n, false);
            snprintf(chosen[k], sizeof chosen[k], "%s", last_resize_kernel);
            size = bytes_of(&n.out);
            bits[k] = n.result;
            n.result = NULL;
            free(x);
            node_free(&n);
        }
        clrun__resize_kernels = 2;
        if (strcmp(chosen[2], cases[i].fastest) != 0)
            fail_msg("resize %s -> %s: %s chosen, %s expected", c->in, c->out, chosen[2], cases[i].fastest);
        assert_string_equal(chosen[0], "clrun_resize_interp_f32");
        for (int k = 0; k < 2; k++)
            if (memcmp(bits[k], bits[2], size) != 0)
                fail_msg("resize %s -> %s: %s and %s differ", c->in, c->out, chosen[k], chosen[2]);
        for (int k = 0; k < 3; k++)
            free(bits[k]);
    }
}

/* ---- in a graph, in every executor mode -------------------------------------------------- */

static const char chain_graph[] =
    "input x: f32[4, 6, 5]\n"
    "input idx: i64[3]\n"
    "node a = split(x) axis=1 parts=3 index=0\n"
    "node b = split(x) axis=1 parts=3 index=2\n"
    "node c = concat(b, a) axis=1\n"
    "node d = pad(c) pads=[0, 1, 2, 0, 0, 1] mode=1\n"
    "node e = trilu(d) upper=0 k=1\n"
    "node f = cumsum(e) axis=-1 exclusive=1\n"
    "node g = gather(f, idx) axis=0\n"
    "node h = tile(g) repeats=[1, 2, 1]\n"
    "node i = resize(h) sizes=[3, 9, 14] mode=1\n"
    "node j: f32[3, 5, 5] = slice(i) starts=[-1, 0] ends=[-1000, 100] axes=[1, 2] steps=[-2, 3]\n"
    "output j, e\n";

static void run_chain(clrun_exec_mode mode, const char *allocator, unsigned char **outputs,
                      uint64_t *sizes)
{
    clrun_context_options o;
    clrun_context_options_init(&o);
    o.allocator = allocator;
    clrun_context *c = NULL;
    assert_int_equal(clrun_context_create(&o, &c), CLRUN_OK);
    clrun_graph *g = NULL;
    char err[256];
    if (clrun_graph_parse(chain_graph, sizeof chain_graph - 1, "chain.graph", &g, err,
                          sizeof err) != CLRUN_OK)
        fail_msg("parse: %s", err);
    clrun_exec_options eo = {.mode = mode, .plan_time_limit_s = 0.05};
    clrun_exec *exec = NULL;
    if (clrun_exec_create(c, g, &eo, &exec) != CLRUN_OK)
        fail_msg("exec: %s", clrun_last_error(c));
    float x[120];
    int64_t idx[3] = {3, -4, 1};
    for (int i = 0; i < 120; i++)
        x[i] = (float)((i * 37) % 23) - 11.5f;
    clrun_buffer in[2];
    assert_int_equal(clrun_alloc(c, sizeof x, &in[0]), CLRUN_OK);
    assert_int_equal(clrun_alloc(c, sizeof idx, &in[1]), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(c, &in[0], x), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(c, &in[1], idx), CLRUN_OK);
    if (clrun_exec_run(exec, in, 2) != CLRUN_OK)
        fail_msg("run: %s", clrun_last_error(c));
    for (int i = 0; i < 2; i++) {
        cl_mem mem;
        assert_int_equal(clrun_exec_output(exec, i, &mem, &sizes[i]), CLRUN_OK);
        outputs[i] = malloc((size_t)sizes[i]);
        assert_int_equal(clrun_exec_read_output(exec, i, outputs[i], sizes[i]), CLRUN_OK);
    }
    clrun_free(c, &in[0]);
    clrun_free(c, &in[1]);
    clrun_exec_destroy(exec);
    clrun_graph_destroy(g);
    clrun_context_destroy(c);
}

static void a_graph_of_them_gives_the_same_bits_in_every_mode(void **state)
{
    (void)state;
    unsigned char *base[2];
    uint64_t base_sizes[2];
    run_chain(CLRUN_EXEC_NAIVE, "buddy", base, base_sizes);
    assert_int_equal(base_sizes[0], 3 * 5 * 5 * 4); /* j: f32[3, 5, 5] */
    const struct {
        clrun_exec_mode mode;
        const char *allocator;
    } modes[] = {{CLRUN_EXEC_POOLED, "buddy"}, {CLRUN_EXEC_POOLED, "slab"},
                 {CLRUN_EXEC_POOLED, "bump"}, {CLRUN_EXEC_PLANNED, "buddy"}};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        unsigned char *got[2];
        uint64_t sizes[2];
        run_chain(modes[m].mode, modes[m].allocator, got, sizes);
        for (int i = 0; i < 2; i++) {
            assert_int_equal(sizes[i], base_sizes[i]);
            if (memcmp(got[i], base[i], (size_t)sizes[i]) != 0)
                fail_msg("output %d differs in %s/%s from naive", i,
                         clrun_exec_mode_name(modes[m].mode), modes[m].allocator);
            free(got[i]);
        }
    }
    free(base[0]), free(base[1]);
}

/* ---- views, without a device ------------------------------------------------------------- */

static void views_merge_what_the_input_walks_as_one(void **state)
{
    (void)state;
    clrun_tensor_type x = type(CLRUN_F32, "2,3,4"), y;
    clrun_attr keep = INTS("perm", 0, 1, 2), heads = INTS("perm", 1, 0, 2);
    clrun__op_call call = {&x, 1, &y, 1, &keep, 1, 0};
    char err[256];
    clrun__view v;
    assert_int_equal(clrun__op_find("transpose")->infer(&call, &y, err, sizeof err), CLRUN_OK);
    assert_true(clrun__view_of("transpose", &call, &v));
    assert_int_equal(v.rank, 1); /* the identity is one contiguous run */
    assert_int_equal(v.dims[0], 24);
    assert_int_equal(v.strides[0], 1);
    call.attrs = &heads;
    assert_int_equal(clrun__op_find("transpose")->infer(&call, &y, err, sizeof err), CLRUN_OK);
    assert_true(clrun__view_of("transpose", &call, &v));
    assert_int_equal(v.rank, 3);
    assert_int_equal(v.strides[0], 4);
    assert_int_equal(v.strides[1], 12);
    /* a reversed axis: a negative stride from the last element */
    clrun_attr rev[4] = {INTS("starts", -1), INTS("ends", INT64_MIN), INTS("axes", 2),
                         INTS("steps", -1)};
    clrun__op_call sc = {&x, 1, &y, 1, rev, 4, 0};
    assert_int_equal(clrun__op_find("slice")->infer(&sc, &y, err, sizeof err), CLRUN_OK);
    assert_true(clrun__view_of("slice", &sc, &v));
    assert_int_equal(v.rank, 2);
    assert_int_equal(v.base, 3);
    assert_int_equal(v.strides[1], -1);
    assert_false(clrun__view_of("matmul", &sc, &v));
}

static void pad_sources_reflect_like_numpy(void **state)
{
    (void)state;
    /* np.pad(arange(4), 9, 'reflect') starts 3 2 1 0 1 2 3 2 1 | 0 1 2 3 | 2 1 0 1 2 3 2 1 0 */
    const int64_t before[9] = {3, 2, 1, 0, 1, 2, 3, 2, 1}, after[9] = {2, 1, 0, 1, 2, 3, 2, 1, 0};
    for (int c = 0; c < 9; c++) {
        assert_int_equal(clrun__pad_source(c, 9, 4, CLRUN__PAD_REFLECT), before[c]);
        assert_int_equal(clrun__pad_source(13 + c, 9, 4, CLRUN__PAD_REFLECT), after[c]);
    }
    assert_int_equal(clrun__pad_source(0, 2, 4, CLRUN__PAD_EDGE), 0);
    assert_int_equal(clrun__pad_source(9, 2, 4, CLRUN__PAD_EDGE), 3);
    assert_int_equal(clrun__pad_source(1, 2, 4, CLRUN__PAD_CONSTANT), -1);
    assert_int_equal(clrun__pad_source(5, 2, 1, CLRUN__PAD_REFLECT), 0);
}

/* ---- refusals ---------------------------------------------------------------------------- */

static void slice_refuses_what_onnx_would_make_empty_or_ambiguous(void **state)
{
    (void)state;
    node a = {.op = "slice", .input_count = 1, .in = {type(CLRUN_F32, "20,10,5")},
              .attrs = {INTS("starts", 1000), INTS("ends", 1000), INTS("axes", 1)},
              .attr_count = 3}; /* test_slice_start_out_of_bounds: an empty output */
    expect_refusal(&a, "slice: starts 1000, ends 1000, step 1 select nothing from axis 1",
                   "f32[20, 10, 5]", NULL);
    node b = {.op = "slice", .input_count = 1, .in = {type(CLRUN_F32, "4,5")},
              .attrs = {INTS("starts", 0), INTS("ends", 3), INTS("steps", 0)}, .attr_count = 3};
    expect_refusal(&b, "slice: steps entry 0 is 0", NULL);
    node c = {.op = "slice", .input_count = 1, .in = {type(CLRUN_F32, "4,5")},
              .attrs = {INTS("starts", 0, 1), INTS("ends", 3, 4), INTS("axes", 1, -1)},
              .attr_count = 3};
    expect_refusal(&c, "slice: axis -1 given twice", NULL);
    node d = {.op = "slice", .input_count = 1, .in = {type(CLRUN_F32, "4,5")},
              .attrs = {INTS("starts", 0, 1), INTS("ends", 3)}, .attr_count = 2};
    expect_refusal(&d, "slice: starts has 2 entries, ends has 1", NULL);
    node e = {.op = "slice", .input_count = 1, .in = {type(CLRUN_F32, "4,5")},
              .attrs = {INTS("starts", 0), INTS("ends", 3), INTS("axes", 2)}, .attr_count = 3};
    expect_refusal(&e, "slice: axis 2 is out of range for f32[4, 5]", NULL);
    node f = {.op = "slice", .input_count = 1, .in = {type(CLRUN_F32, "4,5")},
              .attrs = {attr_int("axis", 0), INTS("ends", 3)}, .attr_count = 2};
    expect_refusal(&f, "slice: give axis, start, end or starts, ends, axes, steps, not both", NULL);
    node g = {.op = "slice", .input_count = 1, .in = {type(CLRUN_F32, "4,5")}};
    expect_refusal(&g, "slice: missing required attribute 'axis' (or 'starts' and 'ends')", NULL);
    node h = {.op = "slice", .input_count = 1, .in = {type(CLRUN_F32, "4,5")},
              .attrs = {INTS("ends", 3)}, .attr_count = 1};
    expect_refusal(&h, "slice: missing required attribute 'starts'", NULL);
}

static void split_refuses_parts_that_do_not_add_up(void **state)
{
    (void)state;
    node a = {.op = "split", .input_count = 1, .in = {type(CLRUN_F32, "2,6")},
              .attrs = {attr_int("axis", 1), INTS("split", 2, 3), attr_int("index", 0)},
              .attr_count = 3};
    expect_refusal(&a, "split: split sizes add up to 5, axis 1 of f32[2, 6] has 6", NULL);
    node b = {.op = "split", .input_count = 1, .in = {type(CLRUN_F32, "2,7")},
              .attrs = {attr_int("axis", 1), attr_int("parts", 2), attr_int("index", 0)},
              .attr_count = 3};
    expect_refusal(&b, "split: axis 1 of f32[2, 7] (7) does not split into 2 equal parts", NULL);
    node c = {.op = "split", .input_count = 1, .in = {type(CLRUN_F32, "6")},
              .attrs = {attr_int("parts", 3), attr_int("index", 3)}, .attr_count = 2};
    expect_refusal(&c, "split: index 3 is out of range for 3 parts", NULL);
    node d = {.op = "split", .input_count = 1, .in = {type(CLRUN_F32, "6")},
              .attrs = {attr_int("index", 0)}, .attr_count = 1};
    expect_refusal(&d, "split: give the part sizes (split) or their number (parts)", NULL);
    node e = {.op = "split", .input_count = 1, .in = {type(CLRUN_F32, "6")},
              .attrs = {INTS("split", 0, 0, 6), attr_int("index", 0)}, .attr_count = 2};
    expect_refusal(&e, "split: split entry 0 is 0", "no empty tensors", NULL);
    node f = {.op = "split", .input_count = 1, .in = {type(CLRUN_F32, "6")},
              .attrs = {attr_int("parts", 3)}, .attr_count = 1};
    expect_refusal(&f, "split: missing required attribute 'index'", NULL);
}

static void shape_ops_refuse_shapes_that_do_not_fit(void **state)
{
    (void)state;
    node a = {.op = "expand", .input_count = 1, .in = {type(CLRUN_F32, "3,2")},
              .attrs = {INTS("shape", 4)}, .attr_count = 1};
    expect_refusal(&a, "expand: x f32[3, 2] does not broadcast to the shape (dimension 1: 2 vs 4)",
                   NULL);
    node b = {.op = "tile", .input_count = 1, .in = {type(CLRUN_F32, "3,2")},
              .attrs = {INTS("repeats", 2)}, .attr_count = 1};
    expect_refusal(&b, "tile: repeats has 1 entries for x f32[3, 2] of rank 2", NULL);
    node c = {.op = "tile", .input_count = 1, .in = {type(CLRUN_F32, "3,2")},
              .attrs = {INTS("repeats", 2, 0)}, .attr_count = 1};
    expect_refusal(&c, "tile: repeats entry 1 is 0", NULL);
    node d = {.op = "depth_to_space", .input_count = 1, .in = {type(CLRUN_F32, "1,6,2,2")},
              .attrs = {attr_int("blocksize", 2)}, .attr_count = 1};
    expect_refusal(&d, "depth_to_space: x is f32[1, 6, 2, 2]: its 6 channels are not a multiple "
                   "of blocksize^2 = 4", NULL);
    node e = {.op = "depth_to_space", .input_count = 1, .in = {type(CLRUN_F32, "1,8,2,2")},
              .attrs = {attr_int("blocksize", 2), attr_int("mode", 2)}, .attr_count = 2};
    expect_refusal(&e, "depth_to_space: attribute 'mode' is 2: must be 0 to 1", NULL);
    node f = {.op = "space_to_depth", .input_count = 1, .in = {type(CLRUN_F32, "1,1,4,5")},
              .attrs = {attr_int("blocksize", 2)}, .attr_count = 1};
    expect_refusal(&f, "space_to_depth: x is f32[1, 1, 4, 5]: its height and width are not "
                   "multiples of blocksize 2", NULL);
    node g = {.op = "space_to_depth", .input_count = 1, .in = {type(CLRUN_F32, "4,5,6")},
              .attrs = {attr_int("blocksize", 2)}, .attr_count = 1};
    expect_refusal(&g, "space_to_depth: x is f32[4, 5, 6]: expected [N, C, H, W]", NULL);
    node h = {.op = "space_to_depth", .input_count = 1, .in = {type(CLRUN_F32, "1,1,4,4")},
              .attrs = {attr_int("blocksize", 2), attr_int("mode", 1)}, .attr_count = 2};
    expect_refusal(&h, "space_to_depth: unknown attribute 'mode' (accepted: blocksize)", NULL);
}

static void index_ops_refuse_bad_axes_and_indices(void **state)
{
    (void)state;
    node a = {.op = "gather", .input_count = 2,
              .in = {type(CLRUN_F32, "5,4"), type(CLRUN_F32, "3")},
              .attrs = {attr_int("axis", 0)}, .attr_count = 1};
    expect_refusal(&a, "gather: indices are f32[3]: expected i32 or i64", NULL);
    node b = {.op = "gather", .input_count = 2,
              .in = {type(CLRUN_F32, "5,4"), type(CLRUN_I64, "3")},
              .attrs = {attr_int("axis", 2)}, .attr_count = 1};
    expect_refusal(&b, "gather: axis 2 is out of range for f32[5, 4]", NULL);
    node c = {.op = "gather", .input_count = 2,
              .in = {type(CLRUN_F32, "5,4,3"), type(CLRUN_I64, "1,1,1,1,1,1,1")},
              .attrs = {attr_int("axis", 1)}, .attr_count = 1};
    expect_refusal(&c, "gather: indices i64[1, 1, 1, 1, 1, 1, 1] on axis 1 of f32[5, 4, 3] give 9 "
                   "dimensions (at most 8)", NULL);
    node d = {.op = "gather", .input_count = 2,
              .in = {type(CLRUN_F32, "5,4"), type(CLRUN_I64, "3")}};
    expect_refusal(&d, "gather: indices are i64[3]: expected i32", NULL); /* embedding form */
    node e = {.op = "gather_elements", .input_count = 2,
              .in = {type(CLRUN_F32, "3,3"), type(CLRUN_I64, "4,3")},
              .attrs = {attr_int("axis", 0)}, .attr_count = 1};
    assert_int_equal(infer(&e, (char[256]){0}, 256), CLRUN_OK); /* larger on the axis is fine */
    node f = {.op = "gather_elements", .input_count = 2,
              .in = {type(CLRUN_F32, "3,3"), type(CLRUN_I64, "2,4")},
              .attrs = {attr_int("axis", 0)}, .attr_count = 1};
    expect_refusal(&f, "gather_elements: indices i64[2, 4] do not fit data f32[3, 3]", NULL);
    node g = {.op = "gather_elements", .input_count = 2,
              .in = {type(CLRUN_F32, "3,3"), type(CLRUN_I64, "3")}};
    expect_refusal(&g, "gather_elements: indices i64[3] do not fit data f32[3, 3]", NULL);
    node h = {.op = "cumsum", .input_count = 1, .in = {type(CLRUN_BOOL, "3")},
              .attrs = {attr_int("axis", 0)}, .attr_count = 1};
    expect_refusal(&h, "cumsum: input 0 is bool[3]: expected f32, f64, i32 or i64", NULL);
    node i = {.op = "cumsum", .input_count = 1, .in = {type(CLRUN_F32, "3,4")},
              .attrs = {attr_int("axis", -3)}, .attr_count = 1};
    expect_refusal(&i, "cumsum: axis -3 is out of range for f32[3, 4]", NULL);
    node j = {.op = "cumsum", .input_count = 1, .in = {type(CLRUN_F32, "3,4")},
              .attrs = {attr_int("axis", 0), attr_int("reverse", 2)}, .attr_count = 2};
    expect_refusal(&j, "cumsum: attribute 'reverse' is 2: must be 0 to 1", NULL);
    node k = {.op = "cumsum", .input_count = 1, .in = {type(CLRUN_F32, "3,4")}};
    expect_refusal(&k, "cumsum: missing required attribute 'axis'", NULL);
    node l = {.op = "trilu", .input_count = 1, .in = {type(CLRUN_F32, "3")}};
    expect_refusal(&l, "trilu: x is f32[3]: expected [..., M, N]", NULL);
    node m = {.op = "trilu", .input_count = 1, .in = {type(CLRUN_F32, "3,3")},
              .attrs = {attr_int("upper", -1)}, .attr_count = 1};
    expect_refusal(&m, "trilu: attribute 'upper' is -1: must be 0 to 1", NULL);
}

static void pad_refuses_bad_pads_modes_and_values(void **state)
{
    (void)state;
    node a = {.op = "pad", .input_count = 1, .in = {type(CLRUN_F32, "3,4")},
              .attrs = {INTS("pads", 1, 1, 1)}, .attr_count = 1};
    expect_refusal(&a, "pad: pads has 3 entries for x f32[3, 4] of rank 2: expected 4", NULL);
    node b = {.op = "pad", .input_count = 1, .in = {type(CLRUN_F32, "3,4")},
              .attrs = {INTS("pads", -2, 0, -1, 0)}, .attr_count = 1};
    expect_refusal(&b, "pad: pads [-2, -1] leave axis 0 of f32[3, 4] with 0 elements", NULL);
    node c = {.op = "pad", .input_count = 1, .in = {type(CLRUN_I32, "3,4")},
              .attrs = {INTS("pads", 1, 1, 1, 1), attr_float("value", 1.5)}, .attr_count = 2};
    expect_refusal(&c, "pad: value 1.5 does not fit i32[3, 4]", NULL);
    node d = {.op = "pad", .input_count = 1, .in = {type(CLRUN_BOOL, "3,4")},
              .attrs = {INTS("pads", 1, 1, 1, 1), attr_float("value", 2)}, .attr_count = 2};
    expect_refusal(&d, "pad: value 2 does not fit bool[3, 4]", NULL);
    node e = {.op = "pad", .input_count = 1, .in = {type(CLRUN_F32, "3,4")},
              .attrs = {INTS("pads", 1, 1, 1, 1), attr_int("mode", 3)}, .attr_count = 2};
    expect_refusal(&e, "pad: attribute 'mode' is 3: must be 0 to 2", NULL);
    node f = {.op = "pad", .input_count = 1, .in = {type(CLRUN_F32, "3,4")},
              .attrs = {INTS("pads", INT64_MAX, 0, 0, 0)}, .attr_count = 1};
    expect_refusal(&f, "pad: pads [9223372036854775807, 0] of axis 0 are too large", NULL);
}

static void resize_refuses_modes_and_sizes_it_lacks(void **state)
{
    (void)state;
    node a = {.op = "resize", .input_count = 1, .in = {type(CLRUN_I32, "1,1,2,2")},
              .attrs = {INTS("sizes", 1, 1, 4, 4), attr_int("mode", 1)}, .attr_count = 2};
    expect_refusal(&a, "resize: x is i32[1, 1, 2, 2]: linear and cubic modes take f32", NULL);
    node b = {.op = "resize", .input_count = 1, .in = {type(CLRUN_F32, "1,1,2,2")},
              .attrs = {INTS("sizes", 4, 4)}, .attr_count = 1};
    expect_refusal(&b, "resize: sizes has 2 entries for x f32[1, 1, 2, 2] of rank 4", NULL);
    node c = {.op = "resize", .input_count = 1, .in = {type(CLRUN_F32, "1,1,2,2")},
              .attrs = {INTS("sizes", 1, 1, 4, 4), attr_int("coordinate_transformation_mode", 6)},
              .attr_count = 2};
    expect_refusal(&c, "resize: attribute 'coordinate_transformation_mode' is 6: must be 0 to 5",
                   NULL);
    node c2 = {.op = "resize", .input_count = 1, .in = {type(CLRUN_F32, "1,1,2,2")},
               .attrs = {INTS("sizes", 1, 1, 4, 4), attr_int("coordinate_transformation_mode", 5),
                         attr_float("roi_end2", INFINITY)},
               .attr_count = 3}; /* tf_crop_and_resize's region */
    expect_refusal(&c2, "resize: the region of interest of axis 2 is [0, inf]: must be finite", NULL);
    node d = {.op = "resize", .input_count = 1, .in = {type(CLRUN_F32, "2,2")},
              .attrs = {INTS("sizes", 4, 4), attr_float("scale3", 2)}, .attr_count = 2};
    expect_refusal(&d, "resize: attribute 'scale3' is for an axis that x (rank 2) lacks", NULL);
    node e = {.op = "resize", .input_count = 1, .in = {type(CLRUN_F32, "2,2")},
              .attrs = {INTS("sizes", 4, 4), attr_float("scale1", 0)}, .attr_count = 2};
    expect_refusal(&e, "resize: attribute 'scale1' is 0: must be > 0", NULL);
    node f = {.op = "resize", .input_count = 1, .in = {type(CLRUN_F32, "2,2")},
              .attrs = {INTS("sizes", 4, 0)}, .attr_count = 1};
    expect_refusal(&f, "resize: sizes entry 1 is 0", NULL);
    node g = {.op = "resize", .input_count = 1, .in = {type(CLRUN_F32, "2,2")},
              .attrs = {INTS("sizes", 4, 4), attr_int("nearest_mode", 4)}, .attr_count = 2};
    expect_refusal(&g, "resize: attribute 'nearest_mode' is 4: must be 0 to 3", NULL);
    /* A type may be huge and still valid; its tap table is refused before it is built. */
    node h = {.op = "resize", .input_count = 1, .in = {type(CLRUN_F32, "1,2")},
              .attrs = {INTS("sizes", 1, 5000000)}, .attr_count = 1};
    char err[256];
    assert_int_equal(infer(&h, err, sizeof err), CLRUN_OK);
    const clrun__op *op = clrun__op_find("resize");
    clrun__op_call call = call_of(&h);
    void *st = NULL;
    assert_int_equal(clrun__op_kernels_find(op)->prepare(ctx, op, &call, &st),
                     CLRUN_ERROR_INVALID_SIZE);
    assert_null(st);
    assert_non_null(strstr(clrun_last_error(ctx), "more than the tap table holds"));
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
        cmocka_unit_test(views_merge_what_the_input_walks_as_one),
        cmocka_unit_test(pad_sources_reflect_like_numpy),
        cmocka_unit_test(transpose_moves_every_dtype),
        cmocka_unit_test(reshape_copies_every_dtype),
        cmocka_unit_test(concat_joins_every_dtype_and_many_inputs),
        cmocka_unit_test(concat_at_ranks_7_and_8),
        cmocka_unit_test(slice_follows_onnx_clamping_and_steps),
        cmocka_unit_test(split_gives_each_part),
        cmocka_unit_test(expand_broadcasts_to_a_shape),
        cmocka_unit_test(tile_repeats_every_axis),
        cmocka_unit_test(depth_and_space_rearrange_blocks),
        cmocka_unit_test(gather_takes_any_axis_and_negative_indices),
        cmocka_unit_test(gather_elements_picks_along_an_axis),
        cmocka_unit_test(pad_in_every_mode),
        cmocka_unit_test(trilu_keeps_a_triangle),
        cmocka_unit_test(cumsum_along_any_axis_both_ways),
        cmocka_unit_test(cumsum_f64_runs_with_fp64_and_is_refused_without),
        cmocka_unit_test(resize_nearest_in_every_rounding_and_coordinate_mode),
        cmocka_unit_test(resize_linear_and_cubic_match_the_onnx_reference),
        cmocka_unit_test(resize_kernels_give_the_same_bits),
        cmocka_unit_test(a_graph_of_them_gives_the_same_bits_in_every_mode),
        cmocka_unit_test(slice_refuses_what_onnx_would_make_empty_or_ambiguous),
        cmocka_unit_test(split_refuses_parts_that_do_not_add_up),
        cmocka_unit_test(shape_ops_refuse_shapes_that_do_not_fit),
        cmocka_unit_test(index_ops_refuse_bad_axes_and_indices),
        cmocka_unit_test(pad_refuses_bad_pads_modes_and_values),
        cmocka_unit_test(resize_refuses_modes_and_sizes_it_lacks),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    clrun_test_remove_dir(cache_dir);
    return failed;
}
