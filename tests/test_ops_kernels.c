/* The kernels of the matmul, convolution and row-op families near their limits, on a real
 * device: every variant of the matmul core against the double-precision references here and
 * bit for bit against each other; epilogues equal to the unfused ops bit for bit; constant
 * weights packed once; the tuner's memory; and the ONNX semantics of these families (asymmetric
 * pads, conv_transpose2d, pools with ceil_mode, dilation and count_include_pad, batchnorm,
 * instancenorm, layernorm over an axis, softmax and logsoftmax over any axis, every reduction,
 * argmax/argmin), each against a plain C reference written out below.
 *
 * Tolerance: an output d with reference r (in double) passes when |d - r| <= 1e-5 (|r| + s),
 * s being the sum of the absolute values of the terms that made it. */
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
#include "node_memory.h"
#include "ops/matmul_core.h"
#include "ops/ops.h"
#include "rng.h"

static char cache_dir[512];
static clrun_context *ctx;

/* ---- data and types ---------------------------------------------------------------------- */

static float *random_floats(uint64_t n, double lo, double hi, uint64_t seed)
{
    float *x = malloc(n * sizeof *x + 4);
    uint64_t state = seed;
    for (uint64_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * (double)(rng_next(&state) >> 11) / 9007199254740992.0);
    return x;
}

/* Small integers as floats: ties for argmax, exact sums. */
static float *random_small(uint64_t n, int range, uint64_t seed)
{
    float *x = malloc(n * sizeof *x + 4);
    uint64_t state = seed;
    for (uint64_t i = 0; i < n; i++)
        x[i] = (float)(int)(rng_next(&state) % (uint64_t)range) - (float)(range / 2);
    return x;
}

static clrun_tensor_type type(const char *dims)
{
    return shape_type(CLRUN_F32, dims);
}

static uint64_t elements(const clrun_tensor_type *t)
{
    uint64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= (uint64_t)t->shape[i];
    return n;
}

/* ---- running one node -------------------------------------------------------------------- */

typedef struct node {
    const char *op;
    int input_count;             /* the op's own inputs */
    clrun_tensor_type in[8];
    const float *data[8];        /* own inputs, then epilogue inputs */
    clrun_attr attrs[8];
    int attr_count;
    uint64_t constant_inputs;
    const clrun__epilogue *epilogue;
    clrun_tensor_type out;       /* from infer */
    void *result;                /* read back (malloc'd) */
} node;

static size_t out_bytes(const node *n)
{
    return (size_t)elements(&n->out) * (n->out.dtype == CLRUN_I64 ? 8 : 4);
}

static clrun__op_call call_of(node *n)
{
    clrun__op_call call = {n->in, n->input_count, &n->out, 1, n->attrs, n->attr_count,
                           n->constant_inputs};
    return call;
}

static void infer_or_fail(node *n)
{
    const clrun__op *op = clrun__op_find(n->op);
    assert_non_null(op);
    clrun__op_call call = call_of(n);
    char err[512] = "";
    if (op->infer(&call, &n->out, err, sizeof err) != CLRUN_OK)
        fail_msg("%s refused: %s", n->op, err);
}

/* Set: run_node does not pack the node's constants on the host (as an executor does), so that
 * the node packs them on the device at every enqueue. */
static bool unpacked_run;

/* The kernel the last conv2d that run_node ran launched (its state begins with a
 * clrun__kernel_state, lib/ops/ops_internal.h). */
static char conv2d_kernel[128];

/* Runs the node `runs` times (before run r > 0, `between` is called with the input buffers);
 * the last run's output is in n->result. */
static void run_node(node *n, int runs, void (*between)(cl_mem *inputs))
{
    infer_or_fail(n);
    const clrun__op *op = clrun__op_find(n->op);
    const clrun__op_kernels *kernels = clrun__op_kernels_find(op);
    assert_non_null(kernels);
    clrun__op_call call = call_of(n);
    void *state = NULL;
    clrun_status s;
    if (n->epilogue) {
        clrun__prepare_epilogue_fn prepare = clrun__op_epilogue_prepare(op);
        assert_non_null(prepare);
        s = prepare(ctx, op, &call, n->epilogue, &state);
    } else {
        s = kernels->prepare(ctx, op, &call, &state);
    }
    if (s != CLRUN_OK)
        fail_msg("%s prepare: %s", n->op, clrun_last_error(ctx));
    if (strcmp(n->op, "conv2d") == 0)
        assert_int_equal(clGetKernelInfo(((const clrun__kernel_state *)state)->kernel,
                                         CL_KERNEL_FUNCTION_NAME, sizeof conv2d_kernel,
                                         conv2d_kernel, NULL),
                         CL_SUCCESS);
    int total = n->input_count + (n->epilogue ? n->epilogue->extra_inputs : 0);
    cl_mem in[8], out;
    cl_int e;
    for (int i = 0; i < total; i++) {
        const clrun_tensor_type *t = i < n->input_count ? &n->in[i] : &n->out;
        in[i] = clCreateBuffer(clrun_context_cl(ctx), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                               (size_t)elements(t) * 4, (void *)n->data[i], &e);
        assert_int_equal(e, CL_SUCCESS);
    }
    size_t size = out_bytes(n);
    out = clCreateBuffer(clrun_context_cl(ctx), CL_MEM_READ_WRITE, size, NULL, &e);
    assert_int_equal(e, CL_SUCCESS);
    node_memory memory;
    if (unpacked_run) {
        memset(&memory, 0, sizeof memory);
        if (clrun__node_run_begin(ctx, kernels, state, &out, 1, &memory.run) != CLRUN_OK)
            fail_msg("%s scratch: %s", n->op, clrun_last_error(ctx));
    } else if (node_memory_make(ctx, kernels, state, &call, in, &out, &memory) != CL_SUCCESS) {
        fail_msg("%s pack or scratch: %s", n->op, clrun_last_error(ctx));
    }
    n->result = malloc(size);
    for (int r = 0; r < runs; r++) {
        if (r > 0 && between)
            between(in);
        const cl_uint poison = 0x7fc0dead;
        assert_int_equal(clEnqueueFillBuffer(clrun_context_queue(ctx), out, &poison, 4, 0, size,
                                             0, NULL, NULL), CL_SUCCESS);
        cl_event done = NULL;
        s = kernels->enqueue(ctx, state, &call, in, node_memory_outputs(&memory), 0, NULL, &done);
        if (s != CLRUN_OK)
            fail_msg("%s enqueue: %s", n->op, clrun_last_error(ctx));
        assert_int_equal(clEnqueueReadBuffer(clrun_context_queue(ctx), out, CL_TRUE, 0, size,
                                             n->result, 1, &done, NULL), CL_SUCCESS);
        clReleaseEvent(done);
    }
    kernels->release(state);
    node_memory_free(ctx, &memory);
    for (int i = 0; i < total; i++)
        clReleaseMemObject(in[i]);
    clReleaseMemObject(out);
}

static void expect_close(const node *n, const double *ref, const double *scale, const char *what)
{
    const float *got = n->result;
    for (uint64_t i = 0; i < elements(&n->out); i++) {
        double bound = 1e-5 * (fabs(ref[i]) + (scale ? scale[i] : 0));
        if (!(fabs((double)got[i] - ref[i]) <= bound))
            fail_msg("%s (%s): element %llu is %.9g, reference %.9g (allowed %.3g)", n->op, what,
                     (unsigned long long)i, got[i], ref[i], bound);
    }
}

static void expect_same_bits(const node *a, const node *b, const char *what)
{
    size_t size = out_bytes(a);
    assert_int_equal(size, out_bytes(b));
    const uint32_t *x = a->result, *y = b->result;
    for (size_t i = 0; i < size / 4; i++)
        if (x[i] != y[i])
            fail_msg("%s: word %zu differs: 0x%08x vs 0x%08x", what, i, x[i], y[i]);
}

/* ---- references -------------------------------------------------------------------------- */

/* matmul of 2-D a [M, K] (or transposed [K, M]) and b [K, N] (or [N, K]), batched over a
 * leading dim of a when b is 2-D. */
static void ref_matmul(const node *n, bool ta, bool tb, double alpha, const float *bias,
                       double *out, double *scale)
{
    const clrun_tensor_type *A = &n->in[0], *B = &n->in[1];
    uint64_t M = (uint64_t)(ta ? A->shape[A->rank - 1] : A->shape[A->rank - 2]);
    uint64_t K = (uint64_t)(ta ? A->shape[A->rank - 2] : A->shape[A->rank - 1]);
    uint64_t N = (uint64_t)(tb ? B->shape[0] : B->shape[1]);
    uint64_t batches = elements(A) / (M * K);
    for (uint64_t z = 0; z < batches; z++)
        for (uint64_t m = 0; m < M; m++)
            for (uint64_t j = 0; j < N; j++) {
                double acc = 0, s = 0;
                for (uint64_t k = 0; k < K; k++) {
                    double a = n->data[0][z * M * K + (ta ? k * M + m : m * K + k)];
                    double b = n->data[1][tb ? j * K + k : k * N + j];
                    acc += a * b;
                    s += fabs(a * b);
                }
                double v = alpha * acc + (bias ? bias[j] : 0);
                out[(z * M + m) * N + j] = v;
                scale[(z * M + m) * N + j] = fabs(alpha) * s + (bias ? fabs(bias[j]) : 0);
            }
}

typedef struct conv_params {
    int stride[2], pad[4], dilation[2], groups, output_padding[2];
} conv_params;

static void ref_conv(const node *n, const conv_params *p, double *out, double *scale)
{
    const clrun_tensor_type *X = &n->in[0], *Wt = &n->in[1], *O = &n->out;
    int N = (int)X->shape[0], C = (int)X->shape[1], H = (int)X->shape[2], W = (int)X->shape[3];
    int OC = (int)Wt->shape[0], KH = (int)Wt->shape[2], KW = (int)Wt->shape[3];
    int OH = (int)O->shape[2], OW = (int)O->shape[3], Cg = C / p->groups, Og = OC / p->groups;
    const float *bias = n->input_count > 2 ? n->data[2] : NULL;
    for (int b = 0; b < N; b++)
        for (int o = 0; o < OC; o++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    double acc = bias ? bias[o] : 0, s = fabs(acc);
                    int g = o / Og;
                    for (int c = 0; c < Cg; c++)
                        for (int kh = 0; kh < KH; kh++)
                            for (int kw = 0; kw < KW; kw++) {
                                int ih = oh * p->stride[0] - p->pad[0] + kh * p->dilation[0];
                                int iw = ow * p->stride[1] - p->pad[1] + kw * p->dilation[1];
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                    continue;
                                double t = (double)n->data[0][(((size_t)b * C + g * Cg + c) * H + ih) * W + iw] *
                                           n->data[1][(((size_t)o * Cg + c) * KH + kh) * KW + kw];
                                acc += t;
                                s += fabs(t);
                            }
                    size_t at = (((size_t)b * OC + o) * OH + oh) * OW + ow;
                    out[at] = acc;
                    scale[at] = s;
                }
}

static void ref_conv_transpose(const node *n, const conv_params *p, double *out, double *scale)
{
    const clrun_tensor_type *X = &n->in[0], *Wt = &n->in[1], *O = &n->out;
    int N = (int)X->shape[0], C = (int)X->shape[1], H = (int)X->shape[2], W = (int)X->shape[3];
    int Og = (int)Wt->shape[1], KH = (int)Wt->shape[2], KW = (int)Wt->shape[3];
    int OC = (int)O->shape[1], OH = (int)O->shape[2], OW = (int)O->shape[3], Cg = C / p->groups;
    const float *bias = n->input_count > 2 ? n->data[2] : NULL;
    size_t total = elements(O);
    for (size_t i = 0; i < total; i++)
        out[i] = 0, scale[i] = 0;
    for (int b = 0; b < N; b++)
        for (int c = 0; c < C; c++)
            for (int ih = 0; ih < H; ih++)
                for (int iw = 0; iw < W; iw++)
                    for (int oo = 0; oo < Og; oo++)
                        for (int kh = 0; kh < KH; kh++)
                            for (int kw = 0; kw < KW; kw++) {
                                int oh = ih * p->stride[0] - p->pad[0] + kh * p->dilation[0];
                                int ow = iw * p->stride[1] - p->pad[1] + kw * p->dilation[1];
                                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW)
                                    continue;
                                int o = (c / Cg) * Og + oo;
                                double t = (double)n->data[0][(((size_t)b * C + c) * H + ih) * W + iw] *
                                           n->data[1][(((size_t)c * Og + oo) * KH + kh) * KW + kw];
                                size_t at = (((size_t)b * OC + o) * OH + oh) * OW + ow;
                                out[at] += t;
                                scale[at] += fabs(t);
                            }
    for (size_t i = 0; bias && i < total; i++) {
        int o = (int)(i / ((size_t)OH * OW) % (size_t)OC);
        out[i] += bias[o];
        scale[i] += fabs(bias[o]);
    }
}

typedef struct pool_params {
    int kernel[2], stride[2], pad[4], dilation[2];
    bool ceil_mode, include_pad, max;
} pool_params;

static void ref_pool(const node *n, const pool_params *p, double *out)
{
    const clrun_tensor_type *X = &n->in[0], *O = &n->out;
    int planes = (int)(X->shape[0] * X->shape[1]), H = (int)X->shape[2], W = (int)X->shape[3];
    int OH = (int)O->shape[2], OW = (int)O->shape[3];
    for (int pl = 0; pl < planes; pl++)
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                double acc = p->max ? -INFINITY : 0;
                int count = 0, padded = 0;
                for (int kh = 0; kh < p->kernel[0]; kh++)
                    for (int kw = 0; kw < p->kernel[1]; kw++) {
                        int ih = oh * p->stride[0] - p->pad[0] + kh * p->dilation[0];
                        int iw = ow * p->stride[1] - p->pad[1] + kw * p->dilation[1];
                        if (ih < H + p->pad[2] && iw < W + p->pad[3])
                            padded++;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                            continue;
                        double v = n->data[0][((size_t)pl * H + ih) * W + iw];
                        acc = p->max ? fmax(acc, v) : acc + v;
                        count++;
                    }
                out[((size_t)pl * OH + oh) * OW + ow] =
                    p->max ? acc : acc / (p->include_pad ? padded : count);
            }
}

/* ---- matmul: variants, kernels, epilogue, packing ---------------------------------------- */

typedef struct mm_case {
    const char *a, *b;
    bool ta, tb, bias;
    double alpha;
} mm_case;

static node matmul_node(const mm_case *c, uint64_t seed)
{
    node n = {.op = "matmul", .input_count = c->bias ? 3 : 2, .in = {type(c->a), type(c->b)}};
    if (c->ta)
        n.attrs[n.attr_count++] = attr_int("transpose_a", 1);
    if (c->tb)
        n.attrs[n.attr_count++] = attr_int("transpose_b", 1);
    if (c->alpha != 1)
        n.attrs[n.attr_count++] = attr_float("alpha", c->alpha);
    n.data[0] = random_floats(elements(&n.in[0]), -1, 1, seed);
    n.data[1] = random_floats(elements(&n.in[1]), -1, 1, seed + 1);
    if (c->bias) {
        n.in[2] = type("1");
        n.in[2].shape[0] = c->tb ? n.in[1].shape[0] : n.in[1].shape[1];
        n.data[2] = random_floats((uint64_t)n.in[2].shape[0], -1, 1, seed + 2);
    }
    return n;
}

static void free_node_data(node *n, int count)
{
    for (int i = 0; i < count; i++)
        free((void *)n->data[i]);
}

/* Every variant of the core, the tiled and the one-output kernels: all the same bits, and the
 * first within tolerance of the reference. */
static void matmul_every_kernel_and_variant_gives_the_same_bits(void **state)
{
    (void)state;
    const mm_case cases[] = {
        {"67,131", "131,45", false, false, false, 1},
        {"1,300", "300,7", false, false, true, 1},
        {"130,17", "17,129", false, false, true, 0.5},
        {"37,70", "65,37", true, true, false, -2},
        {"3,20,33", "33,70", false, false, true, 1},
        {"9,64", "100,64", false, true, false, 1},
    };
    static const clrun__kernel_choice others[] = {CLRUN__KERNELS_TILED, CLRUN__KERNELS_SIMPLE};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        node first = matmul_node(&cases[c], 100 + 10 * c);
        clrun__ops_kernels = CLRUN__KERNELS_VECTOR;
        clrun__ops_variant = 0;
        run_node(&first, 1, NULL);
        uint64_t count = elements(&first.out);
        double *ref = malloc(count * sizeof *ref), *scale = malloc(count * sizeof *scale);
        ref_matmul(&first, cases[c].ta, cases[c].tb, cases[c].alpha,
                   cases[c].bias ? first.data[2] : NULL, ref, scale);
        expect_close(&first, ref, scale, "core variant 0");
        for (int v = 1; v < 4; v++) {
            node other = first;
            clrun__ops_variant = v;
            run_node(&other, 1, NULL);
            expect_same_bits(&first, &other, "a core variant against variant 0");
            free(other.result);
        }
        clrun__ops_variant = -1;
        for (size_t k = 0; k < sizeof others / sizeof others[0]; k++) {
            node other = first;
            clrun__ops_kernels = others[k];
            run_node(&other, 1, NULL);
            expect_same_bits(&first, &other, "tiled or one-output kernel against the core");
            free(other.result);
        }
        clrun__ops_kernels = CLRUN__KERNELS_AUTO;
        free(ref), free(scale), free(first.result);
        free_node_data(&first, first.input_count);
    }
}

/* Runs `op` (an elementwise op of the table) over the given inputs of `t`'s shape. */
static float *run_elementwise(const char *op, const clrun_tensor_type *t, int inputs,
                              const float *a, const float *b)
{
    node n = {.op = op, .input_count = inputs, .in = {*t, *t}, .data = {a, b}};
    run_node(&n, 1, NULL);
    return n.result;
}

static void matmul_epilogue_equals_the_unfused_ops_bit_for_bit(void **state)
{
    (void)state;
    const clrun__epilogue ep = {"fmax((v) + x0[(i)], 0.0f)", NULL, 1, 0, 0};
    static const clrun__kernel_choice choices[] = {CLRUN__KERNELS_AUTO, CLRUN__KERNELS_TILED};
    for (size_t k = 0; k < sizeof choices / sizeof choices[0]; k++) {
        clrun__ops_kernels = choices[k];
        const mm_case c = {"2,33,70", "70,50", false, false, true, 1};
        node plain = matmul_node(&c, 300);
        run_node(&plain, 1, NULL);
        float *residual = random_floats(elements(&plain.out), -1, 1, 310);
        float *sum = run_elementwise("add", &plain.out, 2, plain.result, residual);
        float *relu = run_elementwise("relu", &plain.out, 1, sum, NULL);
        node fused = plain;
        fused.epilogue = &ep;
        fused.data[3] = residual;
        run_node(&fused, 1, NULL);
        node want = plain;
        want.result = relu;
        expect_same_bits(&want, &fused, "matmul + add + relu fused against unfused");
        free(sum), free(relu), free(residual), free(plain.result), free(fused.result);
        free_node_data(&plain, plain.input_count);
    }
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
}

static void epilogue_that_does_not_build_is_a_clean_error(void **state)
{
    (void)state;
    const clrun__epilogue ep = {"v + no_such_name", NULL, 0, 0, 0};
    const mm_case c = {"4,8", "8,8", false, false, false, 1};
    node n = matmul_node(&c, 320);
    infer_or_fail(&n);
    const clrun__op *op = clrun__op_find("matmul");
    clrun__op_call call = call_of(&n);
    void *st = (void *)1;
    assert_int_equal(clrun__op_epilogue_prepare(op)(ctx, op, &call, &ep, &st), CLRUN_ERROR_BUILD_FAILED);
    assert_null(st);
    assert_non_null(strstr(clrun_last_error(ctx), "no_such_name"));
    assert_null(clrun__op_epilogue_prepare(clrun__op_find("add")));
    free_node_data(&n, n.input_count);
}

/* A constant B is packed at the first run only: changing its buffer afterwards changes nothing
 * (the contract of a constant is that it never changes), while a B that is not constant is
 * packed at every run. */
static float *changed_b;
static size_t changed_b_bytes;
static void overwrite_b(cl_mem *inputs)
{
    assert_int_equal(clEnqueueWriteBuffer(clrun_context_queue(ctx), inputs[1], CL_TRUE, 0,
                                          changed_b_bytes, changed_b, 0, NULL, NULL), CL_SUCCESS);
}

static void constant_weights_are_packed_once(void **state)
{
    (void)state;
    const mm_case c = {"16,40", "40,24", false, false, false, 1};
    clrun__ops_kernels = CLRUN__KERNELS_VECTOR;
    node once = matmul_node(&c, 400);
    changed_b_bytes = 40 * 24 * 4;
    changed_b = random_floats(40 * 24, -1, 1, 401);
    node fresh = once;
    run_node(&fresh, 1, NULL);
    once.constant_inputs = 2;
    run_node(&once, 2, overwrite_b);
    expect_same_bits(&fresh, &once, "constant B after its buffer changed");
    node every = once;
    every.constant_inputs = 0;
    run_node(&every, 2, overwrite_b);
    node changed = fresh;
    changed.data[1] = changed_b;
    run_node(&changed, 1, NULL);
    expect_same_bits(&changed, &every, "non-constant B repacked");
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
    free(fresh.result), free(once.result), free(every.result), free(changed.result), free(changed_b);
    free_node_data(&fresh, fresh.input_count);
}

/* ---- the tuner --------------------------------------------------------------------------- */

static int timer_calls;
static clrun_status fake_timer(clrun_context *c, void *user, size_t variant, double *seconds)
{
    (void)c, (void)user;
    timer_calls++;
    *seconds = variant == 2 ? 0.001 : 0.002; /* variant 2 is the fastest */
    return CLRUN_OK;
}

/* Variant 1 is the fastest, but its first run is disturbed (a machine busy with other work). */
static clrun_status disturbed_timer(clrun_context *c, void *user, size_t variant, double *seconds)
{
    (void)c, (void)user;
    timer_calls++;
    *seconds = variant != 1 ? 0.002 : timer_calls == 2 ? 0.009 : 0.001;
    return CLRUN_OK;
}

static void one_disturbed_run_does_not_decide(void **state)
{
    (void)state;
    size_t chosen = 9;
    timer_calls = 0;
    assert_int_equal(clrun__core_tune(ctx, "test shape disturbed", 1e9, 3, disturbed_timer, NULL, &chosen),
                     CLRUN_OK);
    assert_int_equal(chosen, 1);
}

static void tuning_is_remembered_across_contexts(void **state)
{
    (void)state;
    size_t chosen = 9;
    timer_calls = 0;
    assert_int_equal(clrun__core_tune(ctx, "test shape 1", 1e9, 4, fake_timer, NULL, &chosen), CLRUN_OK);
    assert_int_equal(chosen, 2);
    assert_int_equal(timer_calls, 3 * 4); /* three rounds of the four */
    clrun_context *second = NULL;
    setenv("CLRUN_TUNE", "0", 1); /* the default: a remembered choice is still taken */
    assert_int_equal(clrun_context_create(NULL, &second), CLRUN_OK);
    setenv("CLRUN_TUNE", "1", 1);
    timer_calls = 0;
    chosen = 9;
    assert_int_equal(clrun__core_tune(second, "test shape 1", 1e9, 4, fake_timer, NULL, &chosen), CLRUN_OK);
    assert_int_equal(chosen, 2);
    assert_int_equal(timer_calls, 0); /* remembered: no timing */
    /* Not remembered and not asked to tune: the default variant, nothing timed. */
    assert_int_equal(clrun__core_tune(second, "test shape never tuned", 1e9, 4, fake_timer, NULL, &chosen),
                     CLRUN_OK);
    assert_int_equal(chosen, 0);
    assert_int_equal(timer_calls, 0);
    clrun_context_destroy(second);
    /* Too small to matter: the default, untimed. */
    assert_int_equal(clrun__core_tune(ctx, "test shape 2", 1e3, 4, fake_timer, NULL, &chosen), CLRUN_OK);
    assert_int_equal(chosen, 0);
    assert_int_equal(timer_calls, 0);
}

/* The core's work-groups: one work-item on POCL (which compiles a work-group function per local
 * size, a loop over the work-items in it: one work-item compiles faster), four elsewhere; every
 * variant launches with the one local size, and its work-items' steps cover its LM row blocks
 * a group, so the groups and the blocks each covers are the same whichever the group. */
static void core_groups_are_one_work_item_on_pocl(void **state)
{
    (void)state;
    const clrun_device_info *info = clrun_context_device(ctx);
    bool pocl = strstr(info->platform_name, "Portable Computing Language") != NULL &&
                strcmp(info->type, "CPU") == 0;
    assert_int_equal(clrun__core_group(ctx), pocl ? 1 : 4);
    const uint64_t rows[] = {1, 2, 4, 8, 100};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        size_t count = 0;
        const clrun__core_variant *v = clrun__core_candidates(rows[r], rows[r] >= 8, &count);
        for (size_t i = 0; i < count; i++) {
            const size_t blocks[] = {1, 3, 17, 64, 1001};
            for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
                size_t g1 = 0, l1 = 0, g4 = 0, l4 = 0;
                clrun__core_row_launch(&v[i], 1, blocks[b], &g1, &l1);
                clrun__core_row_launch(&v[i], 4, blocks[b], &g4, &l4);
                assert_int_equal(l1, 1);
                assert_int_equal(l4, v[i].lm < 4 ? v[i].lm : 4);
                assert_int_equal(l1 * clrun__core_steps(&v[i], 1), v[i].lm);
                assert_int_equal(l4 * clrun__core_steps(&v[i], 4), v[i].lm);
                assert_int_equal(g1 / l1, g4 / l4); /* the same groups */
                assert_true(g1 / l1 * v[i].lm >= blocks[b]);
                assert_true(g1 / l1 * v[i].lm < blocks[b] + v[i].lm);
            }
        }
    }
}

/* ---- conv2d ------------------------------------------------------------------------------ */

static node conv_node(const char *op, const char *x, const char *w, const conv_params *p,
                      bool bias, uint64_t seed)
{
    node n = {.op = op, .input_count = bias ? 3 : 2, .in = {type(x), type(w)}};
    const int64_t stride[2] = {p->stride[0], p->stride[1]};
    const int64_t pads[4] = {p->pad[0], p->pad[1], p->pad[2], p->pad[3]};
    const int64_t dilation[2] = {p->dilation[0], p->dilation[1]};
    n.attrs[n.attr_count++] = attr_ints("stride", 2, stride);
    n.attrs[n.attr_count++] = attr_ints("pads", 4, pads);
    n.attrs[n.attr_count++] = attr_ints("dilation", 2, dilation);
    n.attrs[n.attr_count++] = attr_int("groups", p->groups);
    if (p->output_padding[0] || p->output_padding[1]) {
        const int64_t op_pad[2] = {p->output_padding[0], p->output_padding[1]};
        n.attrs[n.attr_count++] = attr_ints("output_padding", 2, op_pad);
    }
    n.data[0] = random_floats(elements(&n.in[0]), -1, 1, seed);
    n.data[1] = random_floats(elements(&n.in[1]), -1, 1, seed + 1);
    if (bias) {
        n.in[2] = type("1");
        n.in[2].shape[0] = strcmp(op, "conv2d") == 0 ? n.in[1].shape[0] : n.in[1].shape[1] * p->groups;
        n.data[2] = random_floats((uint64_t)n.in[2].shape[0], -1, 1, seed + 2);
    }
    return n;
}

typedef struct conv_case {
    const char *x, *w;
    conv_params p;
    bool bias;
} conv_case;

static void conv2d_every_kernel_and_variant_matches_the_reference(void **state)
{
    (void)state;
    const conv_case cases[] = {
        {"1,16,9,11", "40,16,3,3", {{1, 1}, {1, 1, 1, 1}, {1, 1}, 1, {0, 0}}, true},
        {"2,8,10,10", "32,8,3,3", {{2, 2}, {1, 0, 2, 1}, {1, 1}, 1, {0, 0}}, false}, /* asymmetric */
        {"2,24,5,7", "70,24,1,1", {{1, 1}, {0, 0, 0, 0}, {1, 1}, 1, {0, 0}}, true},  /* pointwise */
        {"1,8,6,6", "32,4,1,1", {{1, 1}, {0, 0, 0, 0}, {1, 1}, 2, {0, 0}}, true},    /* 2 groups */
        {"1,3,20,20", "16,3,7,7", {{2, 2}, {3, 3, 3, 3}, {1, 1}, 1, {0, 0}}, false}, /* stem */
        {"1,8,9,9", "16,8,3,3", {{1, 1}, {2, 2, 2, 2}, {2, 2}, 1, {0, 0}}, true},    /* dilated */
        {"2,6,1,50", "20,6,1,5", {{1, 2}, {0, 2, 0, 1}, {1, 1}, 1, {0, 0}}, true},   /* 1-D */
        {"1,12,9,9", "12,1,3,3", {{2, 2}, {1, 1, 1, 1}, {1, 1}, 12, {0, 0}}, true},  /* depthwise */
        {"1,12,13,21", "24,1,3,3", {{1, 1}, {1, 1, 1, 1}, {1, 1}, 12, {0, 0}}, true}, /* x2 */
        {"1,8,11,40", "8,1,5,5", {{2, 1}, {2, 2, 2, 2}, {1, 2}, 8, {0, 0}}, false},
        /* depthwise 3x3 rows wide enough for vectors: stride 2, stride 3 (gathered), dilated,
         * asymmetric padding */
        {"1,4,7,45", "4,1,3,3", {{2, 2}, {1, 1, 1, 1}, {1, 1}, 4, {0, 0}}, true},
        {"1,3,6,70", "3,1,3,3", {{3, 3}, {1, 1, 1, 1}, {1, 1}, 3, {0, 0}}, false},
        {"2,3,8,50", "3,1,3,3", {{1, 1}, {2, 2, 2, 2}, {2, 2}, 3, {0, 0}}, true},
        {"1,2,9,37", "2,1,3,3", {{1, 1}, {0, 2, 1, 0}, {1, 1}, 2, {0, 0}}, true},
        /* depthwise planes no wider than a vector (MobileNet's 14 x 14 and 7 x 7): 5 x 5 at
         * stride 2 (the plane copied once), dilated on a tall plane (each row as needed) */
        {"1,6,15,15", "6,1,5,5", {{2, 2}, {2, 2, 2, 2}, {1, 1}, 6, {0, 0}}, true},
        {"1,4,60,13", "4,1,5,5", {{1, 1}, {2, 2, 2, 2}, {2, 2}, 4, {0, 0}}, false},
        /* two vectors a row (EfficientNet's 28 x 28, 5 x 5) */
        {"1,3,28,28", "3,1,5,5", {{1, 1}, {2, 2, 2, 2}, {1, 1}, 3, {0, 0}}, true},
        /* a tall plane at stride 2 (EfficientNet's 56 x 56 -> 28 x 28, 5 x 5): too large to copy
         * whole, its vectors read from x */
        {"1,3,56,56", "3,1,5,5", {{2, 2}, {2, 2, 2, 2}, {1, 1}, 3, {0, 0}}, true},
        {"1,8,12,30", "16,8,3,3", {{1, 1}, {1, 1, 1, 1}, {1, 1}, 1, {0, 0}}, true},  /* interior */
        {"1,4,21,41", "40,4,3,3", {{2, 2}, {1, 1, 1, 1}, {2, 1}, 1, {0, 0}}, false},
        /* one input channel: the core past 3 x 3 (an STFT-like Conv1d, a 5 x 5 stem), else the
         * depthwise kernel */
        {"2,1,1,900", "24,1,1,100", {{1, 40}, {0, 3, 0, 0}, {1, 1}, 1, {0, 0}}, true},
        {"1,1,12,13", "8,1,5,5", {{1, 1}, {2, 2, 2, 2}, {1, 1}, 1, {0, 0}}, false},
        {"1,1,11,9", "6,1,3,3", {{2, 2}, {1, 1, 1, 1}, {1, 1}, 1, {0, 0}}, true},
    };
    static const clrun__kernel_choice choices[] = {CLRUN__KERNELS_VECTOR, CLRUN__KERNELS_TILED,
                                                   CLRUN__KERNELS_SIMPLE};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        node first = conv_node("conv2d", cases[c].x, cases[c].w, &cases[c].p, cases[c].bias, 500 + 10 * c);
        clrun__ops_kernels = CLRUN__KERNELS_VECTOR;
        clrun__ops_variant = 0;
        run_node(&first, 1, NULL);
        uint64_t count = elements(&first.out);
        double *ref = malloc(count * sizeof *ref), *scale = malloc(count * sizeof *scale);
        ref_conv(&first, &cases[c].p, ref, scale);
        expect_close(&first, ref, scale, "core variant 0");
        for (int v = 1; v < 4; v++) {
            node other = first;
            clrun__ops_variant = v;
            run_node(&other, 1, NULL);
            expect_same_bits(&first, &other, "a conv core variant against variant 0");
            free(other.result);
        }
        clrun__ops_variant = -1;
        for (size_t k = 0; k < sizeof choices / sizeof choices[0]; k++) {
            node other = first;
            clrun__ops_kernels = choices[k];
            run_node(&other, 1, NULL);
            expect_close(&other, ref, scale, "tiled, direct or depthwise kernel");
            free(other.result);
        }
        clrun__ops_kernels = CLRUN__KERNELS_AUTO;
        free(ref), free(scale), free(first.result);
        free_node_data(&first, first.input_count);
    }
}

/* Constant weights are packed once on the host, when the executor is created (here: the
 * harness, as an executor does), any other B is read as it is on the device (matmul's, plain or
 * transposed, its last panel gathered) or packed into scratch (conv2d's): the two ways give the
 * same bits, for matmul's B plain, transposed and batched, and for conv2d's
 * weights, grouped, padded or pointwise. */
static void weights_packed_on_the_host_give_the_device_bits(void **state)
{
    (void)state;
    clrun__ops_kernels = CLRUN__KERNELS_VECTOR;
    const mm_case products[] = {
        {"67,131", "131,45", false, false, true, 1},
        {"37,70", "65,37", true, true, false, -2},
        {"2,5,9", "2,9,40", false, false, false, 1},
        {"3,2,7,9", "2,9,17", false, false, false, 1},
    };
    for (size_t c = 0; c < sizeof products / sizeof products[0]; c++) {
        node device = matmul_node(&products[c], 700 + 10 * c), host = device;
        host.constant_inputs = 2;
        run_node(&device, 1, NULL);
        run_node(&host, 1, NULL);
        expect_same_bits(&device, &host, "matmul, B packed on the host and on the device");
        free(device.result), free(host.result);
        free_node_data(&device, device.input_count);
    }
    const conv_case convs[] = {
        {"1,16,9,11", "40,16,3,3", {{1, 1}, {1, 1, 1, 1}, {1, 1}, 1, {0, 0}}, true},
        {"2,24,5,7", "70,24,1,1", {{1, 1}, {0, 0, 0, 0}, {1, 1}, 1, {0, 0}}, true},
        {"1,8,6,6", "32,4,3,3", {{1, 1}, {1, 0, 2, 1}, {1, 1}, 2, {0, 0}}, false},
    };
    for (size_t c = 0; c < sizeof convs / sizeof convs[0]; c++) {
        node device = conv_node("conv2d", convs[c].x, convs[c].w, &convs[c].p, convs[c].bias, 800 + 10 * c);
        node host = device;
        host.constant_inputs = 2;
        run_node(&device, 1, NULL);
        run_node(&host, 1, NULL);
        expect_same_bits(&device, &host, "conv2d, weights packed on the host and on the device");
        free(device.result), free(host.result);
        free_node_data(&device, device.input_count);
    }
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
}

static void conv2d_epilogue_equals_the_unfused_ops_bit_for_bit(void **state)
{
    (void)state;
    const clrun__epilogue ep = {"clamp_relu6(v)", "float clamp_relu6(float v) { return fmin(fmax(v, 0.0f), 6.0f); }", 0, 0, 0};
    const conv_params p = {{1, 1}, {1, 1, 1, 1}, {1, 1}, 1, {0, 0}};
    const conv_params dw = {{1, 1}, {1, 1, 1, 1}, {1, 1}, 8, {0, 0}};
    static const clrun__kernel_choice choices[] = {CLRUN__KERNELS_AUTO, CLRUN__KERNELS_TILED,
                                                   CLRUN__KERNELS_SIMPLE};
    for (int run = 0; run < 6; run++) {
        int depthwise = run % 2;
        clrun__ops_kernels = choices[run / 2];
        node plain = depthwise ? conv_node("conv2d", "1,8,10,12", "8,1,3,3", &dw, true, 600)
                               : conv_node("conv2d", "1,8,10,12", "24,8,3,3", &p, true, 600);
        for (int i = 0; i < 2; i++) /* larger values, so the clamp at 6 is reached */
            for (uint64_t j = 0; j < elements(&plain.in[i]); j++)
                ((float *)plain.data[i])[j] *= 3;
        run_node(&plain, 1, NULL);
        float *six = malloc(elements(&plain.out) * sizeof *six), *zero = calloc(elements(&plain.out), sizeof *zero);
        for (uint64_t j = 0; j < elements(&plain.out); j++)
            six[j] = 6;
        float *relu = run_elementwise("relu", &plain.out, 1, plain.result, NULL);
        float *clamped = run_elementwise("minimum", &plain.out, 2, relu, six);
        node fused = plain;
        fused.epilogue = &ep;
        run_node(&fused, 1, NULL);
        node want = plain;
        want.result = clamped;
        expect_same_bits(&want, &fused, "conv2d + relu6 fused against unfused");
        free(six), free(zero), free(relu), free(clamped), free(plain.result), free(fused.result);
        free_node_data(&plain, plain.input_count);
    }
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
}

/* choose(1) takes the kernel under test, choose(0) the one it must give the bits of, choose(-1)
 * the defaults again. */
typedef void (*kernel_choice)(int which);

/* On each case, with and without a bias and an epilogue that reads its index (a residual) and
 * its channel (a per-channel scale), the kernel choose(1) takes gives the bits of the one
 * choose(0) takes, and stays within the reference. Seeds from seed. */
static void expect_kernel_bits(const conv_case *cases, size_t count, int seed, kernel_choice choose,
                               const char *name, const char *other)
{
    const clrun__epilogue ep = {"fmax((v) + x0[(i)], 0.0f) * (1.0f + 0.125f * (float)((c) % 4u))", NULL, 1, 0, 0};
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
    for (size_t c = 0; c < count; c++) {
        for (int fused = 0; fused < 2; fused++) {
            node chosen = conv_node("conv2d", cases[c].x, cases[c].w, &cases[c].p, cases[c].bias,
                                    seed + 10 * (int)c);
            infer_or_fail(&chosen);
            float *residual = random_floats(elements(&chosen.out), -1, 1, seed + 5 + 10 * (int)c);
            if (fused) {
                chosen.epilogue = &ep;
                chosen.data[chosen.input_count] = residual;
            }
            node plain = chosen;
            choose(1);
            run_node(&chosen, 2, NULL);
            choose(0);
            run_node(&plain, 1, NULL);
            choose(-1);
            char what[128];
            snprintf(what, sizeof what, "%s%s against %s", name, fused ? " + epilogue" : "", other);
            expect_same_bits(&plain, &chosen, what);
            if (!fused) {
                uint64_t n = elements(&chosen.out);
                double *ref = malloc(n * sizeof *ref), *scale = malloc(n * sizeof *scale);
                ref_conv(&chosen, &cases[c].p, ref, scale);
                snprintf(what, sizeof what, "%s kernel", name);
                expect_close(&chosen, ref, scale, what);
                free(ref), free(scale);
            }
            free(residual), free(chosen.result), free(plain.result);
            free_node_data(&chosen, chosen.input_count);
        }
    }
}

/* The core as the other side: the vector kernels' variant 0 (choose(0)), else automatic. */
static void choose_core(int which)
{
    clrun__ops_kernels = which == 0 ? CLRUN__KERNELS_VECTOR : CLRUN__KERNELS_AUTO;
    clrun__ops_variant = which == 0 ? 0 : -1;
}

static void choose_pointwise(int which)
{
    clrun__conv_pointwise_forced = which == 1; /* the CPUs' default, on any device */
    clrun__conv_pointwise_small = which == 1 ? 0 : -1; /* the kernel of 2 vectors of 16 or 8 */
    choose_core(which);
}

static void choose_pointwise_small(int which)
{
    clrun__conv_pointwise_forced = which == 1;
    clrun__conv_pointwise_small = which == 1 ? 1 : -1; /* vectors of 8 on any plane of 8 */
    choose_core(which);
}

/* A pointwise convolution's own kernel (the CPUs' default: kernels/conv.cl's
 * clrun_conv2d_pointwise where a plane holds 2 vectors of positions) gives the core's bits,
 * over planes whose last block overlaps the one before, channels past a block of 8, two images,
 * a 1-D row and work-items of several channel blocks. */
static void conv2d_pointwise_kernel_gives_the_core_bits(void **state)
{
    (void)state;
    const conv_params p = {{1, 1}, {0, 0, 0, 0}, {1, 1}, 1, {0, 0}};
    const conv_case cases[] = {
        {"2,16,9,11", "21,16,1,1", p, true},  /* 99 positions, 21 channels */
        {"1,5,6,7", "8,5,1,1", p, false},     /* 42 positions */
        {"1,33,4,8", "9,33,1,1", p, true},    /* 32: one block on AVX-512, two on AVX2 */
        {"2,3,1,70", "30,3,1,1", p, true},    /* a 1-D row */
        {"1,16,32,40", "21,16,1,1", p, true}, /* three channel blocks in one work-item */
    };
    expect_kernel_bits(cases, sizeof cases / sizeof cases[0], 900, choose_pointwise, "pointwise",
                       "the core");
}

/* The pointwise kernel of small planes (the CPUs' default over 14 x 14: kernels/conv.cl's
 * clrun_conv2d_pointwise_small, 5 vectors of 8 positions a work-item) gives the core's bits,
 * over a 14 x 14 plane (its last block repeating a vector), a 7 x 7 one (its second block
 * repeating its last vector, which overlaps the one before), a plane of one vector, channels
 * past a block of 4, two images, an epilogue and work-items of several channel blocks. */
static void conv2d_pointwise_small_kernel_gives_the_core_bits(void **state)
{
    (void)state;
    const conv_params p = {{1, 1}, {0, 0, 0, 0}, {1, 1}, 1, {0, 0}};
    const conv_case cases[] = {
        {"1,24,7,7", "10,24,1,1", p, true},    /* 49 positions, 10 channels */
        {"2,19,2,4", "7,19,1,1", p, false},    /* 8 positions: one vector */
        {"1,40,14,14", "13,40,1,1", p, true},  /* 196: 5 blocks, the last repeating a vector */
        {"2,5,14,14", "130,5,1,1", p, true},   /* 5 channel blocks in one work-item */
    };
    expect_kernel_bits(cases, sizeof cases / sizeof cases[0], 901, choose_pointwise_small,
                       "pointwise over small planes", "the core");
}

static void choose_depthwise_channels(int which)
{
    clrun__conv_depthwise_channels = which; /* 1: on any device; 0: never; -1: the CPUs' */
}

/* The depthwise kernel over small planes with the channels along the vectors (the CPUs'
 * default where H W <= 256: kernels/conv.cl's clrun_conv2d_depthwise_c) gives the bits of the
 * kernel along the rows, over channels past a block of vectors, a multiplier of 2, two images,
 * stride 2, dilation, asymmetric padding, the inside columns in blocks of 4 and planes by
 * bands of rows. */
static void conv2d_depthwise_channels_kernel_gives_the_row_kernels_bits(void **state)
{
    (void)state;
    const conv_case cases[] = {
        {"1,37,7,7", "37,1,5,5", {{1, 1}, {2, 2, 2, 2}, {1, 1}, 37, {0, 0}}, true},   /* 7 x 7 */
        {"2,20,14,14", "20,1,5,5", {{2, 2}, {2, 2, 2, 2}, {1, 1}, 20, {0, 0}}, false}, /* 14 -> 7 */
        {"1,9,14,14", "18,1,3,3", {{1, 1}, {1, 1, 1, 1}, {1, 1}, 9, {0, 0}}, true},   /* x2 */
        {"1,17,9,13", "17,1,3,3", {{1, 2}, {2, 0, 1, 2}, {2, 1}, 17, {0, 0}}, true},  /* dilated */
        {"1,16,1,1", "16,1,3,3", {{1, 1}, {1, 1, 1, 1}, {1, 1}, 16, {0, 0}}, true},   /* 1 x 1 */
        /* the inside columns 4 at a time and those left after: 16 x 16 unpadded (3 blocks and
         * 2), stride 2 with a dilated 3 x 5 (one block), blocks to the row's end */
        {"1,19,16,16", "19,1,3,3", {{1, 1}, {0, 0, 0, 0}, {1, 1}, 19, {0, 0}}, true},
        {"2,8,5,16", "8,1,3,5", {{1, 2}, {1, 2, 1, 2}, {1, 2}, 8, {0, 0}}, false},
        {"1,5,6,10", "5,1,3,3", {{1, 1}, {0, 0, 0, 0}, {1, 1}, 5, {0, 0}}, true},
        /* planes past 1024 positions by bands of rows: 2 bands, 3 at stride 2 dilated, bands
         * of one row, and 3 x 3 (the CPUs' choice leaves those to the rows, this test not) */
        {"1,6,40,40", "6,1,5,5", {{1, 1}, {2, 2, 2, 2}, {1, 1}, 6, {0, 0}}, true},
        {"2,5,70,30", "5,1,5,5", {{2, 2}, {2, 2, 2, 2}, {2, 1}, 5, {0, 0}}, false},
        {"1,3,12,200", "3,1,5,5", {{1, 1}, {2, 2, 2, 2}, {1, 1}, 3, {0, 0}}, true},
        {"1,4,36,36", "4,1,3,3", {{1, 1}, {1, 1, 1, 1}, {1, 1}, 4, {0, 0}}, false},
    };
    expect_kernel_bits(cases, sizeof cases / sizeof cases[0], 950, choose_depthwise_channels,
                       "depthwise by channels", "by rows");
}

static void choose_depthwise_rows(int which)
{
    clrun__conv_depthwise_channels = which == 1 ? 0 : -1; /* the kernel along the rows */
    clrun__ops_kernels = which == 0 ? CLRUN__KERNELS_SIMPLE : CLRUN__KERNELS_AUTO; /* direct */
}

/* The depthwise kernel along the rows over a plane it copies whole (at most two vectors a row:
 * EfficientNet's 28 x 28, MobileNet's 14 x 14), several output rows at once, gives the bits of
 * the direct kernel, over a last block of fewer rows, rows and columns in the padding, stride
 * 2, a multiplier of 2, dilation and asymmetric padding. */
static void conv2d_depthwise_rows_at_once_give_the_direct_kernels_bits(void **state)
{
    (void)state;
    const conv_case cases[] = {
        {"1,5,28,28", "5,1,5,5", {{1, 1}, {2, 2, 2, 2}, {1, 1}, 5, {0, 0}}, true},    /* 28 rows */
        {"2,3,13,30", "3,1,3,3", {{1, 1}, {1, 1, 1, 1}, {1, 1}, 3, {0, 0}}, false},   /* 13 rows */
        {"1,4,15,15", "4,1,5,5", {{2, 2}, {2, 2, 2, 2}, {1, 1}, 4, {0, 0}}, true},    /* stride 2 */
        {"1,3,14,20", "6,1,3,3", {{1, 1}, {2, 0, 1, 2}, {2, 1}, 3, {0, 0}}, true},    /* x2, dilated */
    };
    expect_kernel_bits(cases, sizeof cases / sizeof cases[0], 960, choose_depthwise_rows,
                       "depthwise rows at once", "the direct kernel");
}

/* Each of the depthwise kernels along the rows (one per path: kernels/conv.cl) runs a shape
 * whose path it is, on 16 lanes and on 8, and gives the direct kernel's bits: a plane copied
 * whole (15 x 15 -> 8 x 8, 5 x 5 at stride 2), a tall one copied a row at a time (no vector
 * inside its dilated rows), 3 x 3 rows wider than two vectors at stride 1 (dilated, padded 2;
 * padded 1, its edges as vectors), 2 and 3, and 5 x 5 ones from x (EfficientNet's 56 x 56 at
 * stride 2). */
static void conv2d_depthwise_row_kernels_each_run_their_path(void **state)
{
    (void)state;
    const struct {
        conv_case c;
        const char *kernel;
    } cases[] = {
        {{"1,4,15,15", "4,1,5,5", {{2, 2}, {2, 2, 2, 2}, {1, 1}, 4, {0, 0}}, true}, "plane"},
        {{"1,4,60,13", "4,1,5,5", {{1, 1}, {2, 2, 2, 2}, {2, 2}, 4, {0, 0}}, false}, "buffered"},
        {{"2,3,8,50", "3,1,3,3", {{1, 1}, {2, 2, 2, 2}, {2, 2}, 3, {0, 0}}, true}, "3x3_s1"},
        /* 'same' 3 x 3 at stride 1 over 32 columns or more: the edges as vectors, then no
         * vector between them (32 on 16 lanes), one ending at the last (40), several (56) */
        {{"1,2,32,32", "2,1,3,3", {{1, 1}, {1, 1, 1, 1}, {1, 1}, 2, {0, 0}}, false}, "3x3_s1"},
        {{"1,3,5,40", "3,1,3,3", {{1, 1}, {1, 1, 1, 1}, {1, 1}, 3, {0, 0}}, true}, "3x3_s1"},
        {{"1,2,3,56", "2,1,3,3", {{1, 1}, {1, 1, 1, 1}, {1, 1}, 2, {0, 0}}, true}, "3x3_s1"},
        {{"1,4,7,90", "4,1,3,3", {{2, 2}, {1, 0, 1, 1}, {1, 1}, 4, {0, 0}}, false}, "3x3_s2"},
        {{"1,3,6,120", "3,1,3,3", {{3, 3}, {1, 1, 1, 1}, {1, 1}, 3, {0, 0}}, true}, "3x3"},
        {{"1,3,56,56", "3,1,5,5", {{2, 2}, {2, 2, 2, 2}, {1, 1}, 3, {0, 0}}, true}, NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const conv_case *one = &cases[c].c;
        char kernel[64];
        snprintf(kernel, sizeof kernel, "clrun_conv2d_depthwise%s%s", cases[c].kernel ? "_" : "",
                 cases[c].kernel ? cases[c].kernel : "");
        node n = conv_node("conv2d", one->x, one->w, &one->p, one->bias, 970 + 10 * (int)c);
        choose_depthwise_rows(1);
        run_node(&n, 1, NULL);
        choose_depthwise_rows(-1);
        if (strcmp(conv2d_kernel, kernel) != 0)
            fail_msg("%s %s: launched %s, expected %s", one->x, one->w, conv2d_kernel, kernel);
        free(n.result);
        free_node_data(&n, n.input_count);
        expect_kernel_bits(one, 1, 971 + 10 * (int)c, choose_depthwise_rows, kernel, "the direct kernel");
    }
}

static void choose_rows(int which)
{
    clrun__conv_rows_forced = which == 1; /* the CPUs' default, on any device */
    choose_core(which);
}

/* The kernel of few input channels with the positions along the vectors (the CPUs' default
 * for a 3-channel stem: kernels/conv.cl's clrun_conv2d_rows) gives the core's bits, over
 * stride 2 and 3, dilation, asymmetric padding, a row's last block moved back, channels past
 * two blocks of 16 (8 on 8-wide devices) and two images. */
static void conv2d_rows_kernel_gives_the_core_bits(void **state)
{
    (void)state;
    const conv_case cases[] = {
        {"1,3,20,40", "37,3,3,3", {{2, 2}, {1, 1, 1, 1}, {1, 1}, 1, {0, 0}}, true},  /* a stem */
        {"2,3,9,37", "10,3,3,3", {{1, 1}, {2, 1, 0, 2}, {2, 2}, 1, {0, 0}}, false}, /* dilated */
        {"1,2,7,60", "9,2,3,3", {{1, 3}, {1, 1, 1, 1}, {1, 1}, 1, {0, 0}}, true},   /* stride 3 */
        {"1,1,6,19", "5,1,5,5", {{1, 1}, {2, 2, 2, 2}, {1, 1}, 1, {0, 0}}, true},   /* one channel */
        /* ResNet's 7 x 7 stem: blocks at both edges copy the row's inside part */
        {"1,3,23,50", "20,3,7,7", {{2, 2}, {3, 3, 3, 3}, {1, 1}, 1, {0, 0}}, true},
        {"1,3,9,41", "6,3,7,7", {{2, 2}, {0, 1, 3, 0}, {1, 1}, 1, {0, 0}}, false},
    };
    expect_kernel_bits(cases, sizeof cases / sizeof cases[0], 970, choose_rows, "rows", "the core");
}

static void choose_core_narrow(int which)
{
    clrun__conv_core_narrow = which == 1 ? 1 : which == 0 ? 0 : -1; /* 1: half width wherever it can */
    choose_core(which < 0 ? -1 : 0); /* the core on both sides, on any device */
}

/* The core at half a 16-wide device's vector width (the CPUs' default where a group has at most
 * 16 output channels: panels of 16 columns, not 32) gives the bits of the full width, over a
 * 32 -> 16 head, channels past a panel, padding, stride 2, groups and two images. */
static void conv2d_core_at_half_width_gives_the_full_widths_bits(void **state)
{
    (void)state;
    const conv_case cases[] = {
        {"1,32,12,13", "16,32,3,3", {{1, 1}, {1, 1, 1, 1}, {1, 1}, 1, {0, 0}}, true}, /* a head */
        {"2,8,9,10", "21,8,3,3", {{2, 2}, {1, 0, 1, 2}, {1, 1}, 1, {0, 0}}, false},  /* 21 > 16 */
        {"1,12,7,7", "12,4,3,3", {{1, 1}, {1, 1, 1, 1}, {1, 1}, 3, {0, 0}}, true},   /* groups */
    };
    expect_kernel_bits(cases, sizeof cases / sizeof cases[0], 990, choose_core_narrow,
                       "the core at half width", "the full width");
}

static void conv_transpose2d_matches_the_reference(void **state)
{
    (void)state;
    const conv_case cases[] = {
        {"1,4,5,5", "4,3,3,3", {{2, 2}, {1, 1, 1, 1}, {1, 1}, 1, {1, 1}}, true},
        {"2,6,4,3", "6,2,2,3", {{1, 2}, {0, 1, 1, 0}, {2, 1}, 3, {0, 1}}, false},
        {"1,2,3,3", "2,5,4,4", {{3, 3}, {0, 0, 0, 0}, {1, 1}, 1, {0, 0}}, true},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        node n = conv_node("conv_transpose2d", cases[c].x, cases[c].w, &cases[c].p, cases[c].bias, 700 + c);
        run_node(&n, 1, NULL);
        uint64_t count = elements(&n.out);
        double *ref = malloc(count * sizeof *ref), *scale = malloc(count * sizeof *scale);
        ref_conv_transpose(&n, &cases[c].p, ref, scale);
        expect_close(&n, ref, scale, "conv_transpose2d");
        free(ref), free(scale), free(n.result);
        free_node_data(&n, n.input_count);
    }
    /* OH = 2 (5 - 1) + 1 (3 - 1) + 1 - 2 + 1 = 10 */
    node t = conv_node("conv_transpose2d", cases[0].x, cases[0].w, &cases[0].p, true, 710);
    infer_or_fail(&t);
    assert_int_equal(t.out.shape[1], 3);
    assert_int_equal(t.out.shape[2], 10);
    free_node_data(&t, t.input_count);
}

/* A constant B that nothing packed on the host is packed on the device at the enqueue, with the
 * packing kernel made there (not at prepare, where it would build the core's head program on a
 * cold start for nothing: an executor packs every constant on the host): the host's bits. */
static void constant_weights_packed_at_the_enqueue_give_the_host_bits(void **state)
{
    (void)state;
    clrun__ops_kernels = CLRUN__KERNELS_VECTOR;
    const mm_case c = {"37,70", "70,45", false, false, true, 1};
    node host = matmul_node(&c, 420);
    host.constant_inputs = 2;
    node device = host;
    run_node(&host, 1, NULL);
    unpacked_run = true;
    run_node(&device, 2, NULL);
    unpacked_run = false;
    expect_same_bits(&host, &device, "matmul, a constant B packed at the enqueue");
    free(host.result), free(device.result);
    free_node_data(&host, host.input_count);
    const conv_params p = {{1, 1}, {1, 1, 1, 1}, {1, 1}, 1, {0, 0}};
    node chost = conv_node("conv2d", "1,16,9,11", "40,16,3,3", &p, true, 421);
    chost.constant_inputs = 2;
    node cdevice = chost;
    run_node(&chost, 1, NULL);
    unpacked_run = true;
    run_node(&cdevice, 1, NULL);
    unpacked_run = false;
    expect_same_bits(&chost, &cdevice, "conv2d, a constant w packed at the enqueue");
    free(chost.result), free(cdevice.result);
    free_node_data(&chost, chost.input_count);
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
}

/* ---- pools ------------------------------------------------------------------------------- */

static void check_pool(const char *x, const pool_params *p, const char *out_dims, uint64_t seed)
{
    node n = {.op = p->max ? "maxpool2d" : "avgpool2d", .input_count = 1, .in = {type(x)}};
    const int64_t k[2] = {p->kernel[0], p->kernel[1]}, s[2] = {p->stride[0], p->stride[1]};
    const int64_t pads[4] = {p->pad[0], p->pad[1], p->pad[2], p->pad[3]};
    n.attrs[n.attr_count++] = attr_ints("kernel", 2, k);
    n.attrs[n.attr_count++] = attr_ints("stride", 2, s);
    n.attrs[n.attr_count++] = attr_ints("pads", 4, pads);
    n.attrs[n.attr_count++] = attr_int("ceil_mode", p->ceil_mode);
    if (p->max) {
        const int64_t d[2] = {p->dilation[0], p->dilation[1]};
        n.attrs[n.attr_count++] = attr_ints("dilation", 2, d);
    } else {
        n.attrs[n.attr_count++] = attr_int("count_include_pad", p->include_pad);
    }
    n.data[0] = random_floats(elements(&n.in[0]), -4, 4, seed);
    run_node(&n, 1, NULL);
    clrun_tensor_type want = type(out_dims);
    for (int i = 0; i < 4; i++)
        if (want.shape[i] != n.out.shape[i])
            fail_msg("%s: output dim %d is %lld, expected %lld", n.op, i, (long long)n.out.shape[i],
                     (long long)want.shape[i]);
    uint64_t count = elements(&n.out);
    double *ref = malloc(count * sizeof *ref), *scale = malloc(count * sizeof *scale);
    ref_pool(&n, p, ref);
    for (uint64_t i = 0; i < count; i++)
        scale[i] = 4;
    expect_close(&n, ref, scale, "pool");
    free(ref), free(scale), free(n.result);
    free_node_data(&n, 1);
}

/* A pool after a depthwise convolution builds no program of its own: its kernel comes from the
 * text of kernels/conv.cl the convolution's kernel was built from (one front-end build of the
 * file on a cold start, not two). A fresh context, so that no earlier test built it. */
static void pools_take_their_kernel_from_the_convolutions_program(void **state)
{
    (void)state;
    clrun_context *saved = ctx, *fresh = NULL;
    assert_int_equal(clrun_context_create(NULL, &fresh), CLRUN_OK);
    ctx = fresh;
    const conv_params dw = {{1, 1}, {1, 1, 1, 1}, {1, 1}, 4, {0, 0}};
    node n = conv_node("conv2d", "1,4,9,9", "4,1,3,3", &dw, true, 740);
    run_node(&n, 1, NULL);
    uint64_t count = elements(&n.out);
    double *ref = malloc(count * sizeof *ref), *scale = malloc(count * sizeof *scale);
    ref_conv(&n, &dw, ref, scale);
    expect_close(&n, ref, scale, "depthwise conv2d");
    free(ref), free(scale), free(n.result);
    free_node_data(&n, n.input_count);
    clrun_program_stats before, after;
    clrun_program_stats_get(ctx, &before);
    const pool_params max = {{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, false, true};
    check_pool("1,4,9,9", &max, "1,4,5,5", 741);
    clrun_program_stats_get(ctx, &after);
    assert_int_equal(after.builds_from_source + after.cache_hits,
                     before.builds_from_source + before.cache_hits);
    ctx = saved;
    clrun_context_destroy(fresh);
}

static void pools_with_onnx_padding_ceil_mode_dilation_and_counts(void **state)
{
    (void)state;
    /* maxpool: ceil_mode (7 + 0 + 1 - 3) / 2 rounded up + 1 = 4 */
    const pool_params a = {{3, 3}, {2, 2}, {0, 0, 1, 1}, {1, 1}, true, false, true};
    check_pool("1,2,7,7", &a, "1,2,4,4", 800);
    const pool_params b = {{2, 3}, {1, 2}, {1, 1, 0, 1}, {2, 1}, false, false, true};
    check_pool("2,3,8,9", &b, "2,3,7,5", 801);
    /* avgpool: count_include_pad and ceil_mode */
    const pool_params c = {{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, true, false};
    check_pool("1,2,8,8", &c, "1,2,5,5", 802);
    const pool_params d = {{3, 2}, {2, 2}, {1, 0, 1, 1}, {1, 1}, false, false, false};
    check_pool("1,3,9,6", &d, "1,3,5,3", 803);
    const pool_params e = {{2, 2}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, true, false};
    check_pool("1,1,5,5", &e, "1,1,3,3", 804);
    /* rows of 13 and 6 outputs, fewer than a vector of 16 (8) but at least half of one: the
     * half-width vectors (SqueezeNet's 27 x 27 -> 13 x 13), max and average */
    const pool_params f = {{3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true, false, true};
    check_pool("2,3,27,27", &f, "2,3,13,13", 805);
    check_pool("1,2,13,13", &f, "1,2,6,6", 806);
    check_pool("1,3,27,27", &c, "1,3,14,14", 807);
}

/* maxpool2d keeps the first of equal taps (kh, kw ascending: -0 before +0 stays -0) and skips
 * NaN (a window of NaN alone gives -inf), as the graph reference's `x > acc ? x : acc`, on the
 * vector columns and the scalar ones at the edges (3 x 3, stride 2, padding 1, 37 columns):
 * plane 0 is -0 on the rows that start a window (0 and the odd ones), +0 on the others, with a
 * NaN; plane 1 is NaN but for a row of -1 at the bottom. */
static void maxpool_keeps_the_first_of_equal_taps_and_skips_nan(void **state)
{
    (void)state;
    node n = {.op = "maxpool2d", .input_count = 1, .in = {type("1,2,9,73")}};
    const int64_t k[2] = {3, 3}, s[2] = {2, 2}, pads[4] = {1, 1, 1, 1}, d[2] = {1, 1};
    n.attrs[n.attr_count++] = attr_ints("kernel", 2, k);
    n.attrs[n.attr_count++] = attr_ints("stride", 2, s);
    n.attrs[n.attr_count++] = attr_ints("pads", 4, pads);
    n.attrs[n.attr_count++] = attr_int("ceil_mode", 0);
    n.attrs[n.attr_count++] = attr_ints("dilation", 2, d);
    float *x = malloc(2 * 9 * 73 * sizeof *x);
    for (int h = 0; h < 9; h++)
        for (int w = 0; w < 73; w++) {
            x[h * 73 + w] = h % 2 || h == 0 ? -0.0f : 0.0f;
            x[9 * 73 + h * 73 + w] = h == 8 ? -1.0f : NAN;
        }
    x[3 * 73 + 20] = NAN;
    n.data[0] = x;
    run_node(&n, 1, NULL);
    assert_int_equal(n.out.shape[2], 5);
    assert_int_equal(n.out.shape[3], 37);
    const float *got = n.result;
    for (int i = 0; i < 5 * 37; i++) {
        /* plane 1's last output row sees the -1s, the others NaN alone */
        const float want0 = -0.0f, want1 = i / 37 == 4 ? -1.0f : -INFINITY;
        if (memcmp(&got[i], &want0, sizeof want0) != 0)
            fail_msg("plane 0 output %d is %g (sign %d), expected -0", i, (double)got[i], signbit(got[i]) != 0);
        if (memcmp(&got[5 * 37 + i], &want1, sizeof want1) != 0)
            fail_msg("plane 1 output %d is %g, expected %g", i, (double)got[5 * 37 + i], (double)want1);
    }
    free(n.result);
    free_node_data(&n, 1);
}

static void global_maxpool_takes_each_planes_maximum(void **state)
{
    (void)state;
    node n = {.op = "global_maxpool", .input_count = 1, .in = {type("2,3,5,7")}};
    n.data[0] = random_floats(2 * 3 * 35, -4, 4, 850);
    run_node(&n, 1, NULL);
    assert_int_equal(n.out.rank, 2);
    const float *got = n.result;
    for (int pl = 0; pl < 6; pl++) {
        float m = -INFINITY;
        for (int i = 0; i < 35; i++)
            m = fmaxf(m, n.data[0][pl * 35 + i]);
        assert_true(got[pl] == m);
    }
    free(n.result);
    free_node_data(&n, 1);
}

/* ---- norms ------------------------------------------------------------------------------- */

/* Normalisation of x over `count` elements starting at base with stride 1. */
static void ref_normalise(const float *x, size_t count, double eps, double *mean, double *inv)
{
    double s = 0, v = 0;
    for (size_t i = 0; i < count; i++)
        s += x[i];
    *mean = s / (double)count;
    for (size_t i = 0; i < count; i++)
        v += (x[i] - *mean) * (x[i] - *mean);
    *inv = 1 / sqrt(v / (double)count + eps);
}

static void layernorm_over_an_axis_with_and_without_beta_once(void)
{
    static const struct { const char *x, *gamma; int64_t axis; bool beta; } cases[] = {
        {"3,5,40", "40", -1, true}, {"3,5,40", "5,40", 1, false}, {"4,1003", "1003", 1, true},
        {"2,3,4,5", "3,4,5", 1, true}, {"7,16", "16", -1, false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        node n = {.op = "layernorm", .input_count = cases[c].beta ? 3 : 2,
                  .in = {type(cases[c].x), type(cases[c].gamma), type(cases[c].gamma)}};
        n.attrs[n.attr_count++] = attr_int("axis", cases[c].axis);
        n.attrs[n.attr_count++] = attr_float("eps", 1e-3);
        uint64_t D = elements(&n.in[1]), total = elements(&n.in[0]);
        n.data[0] = random_floats(total, -3, 3, 900 + c);
        n.data[1] = random_floats(D, -1, 1, 910 + c);
        if (cases[c].beta)
            n.data[2] = random_floats(D, -1, 1, 920 + c);
        run_node(&n, 1, NULL);
        double *ref = malloc(total * sizeof *ref), *scale = malloc(total * sizeof *scale);
        for (uint64_t r = 0; r < total / D; r++) {
            double mean, inv;
            ref_normalise(n.data[0] + r * D, (size_t)D, 1e-3, &mean, &inv);
            for (uint64_t j = 0; j < D; j++) {
                double x = n.data[0][r * D + j], y = (x - mean) * inv * n.data[1][j];
                double b = cases[c].beta ? n.data[2][j] : 0;
                ref[r * D + j] = y + b;
                /* (x - mean) rounds at the scale of x and the mean */
                scale[r * D + j] = (fabs(x) + fabs(mean)) * inv * fabs(n.data[1][j]) * 4 + fabs(b);
            }
        }
        expect_close(&n, ref, scale, cases[c].x);
        free(ref), free(scale), free(n.result);
        free_node_data(&n, n.input_count);
    }
}

/* On CPUs a row per work-item; forced TILED, the work-group per row of devices with local
 * memory; forced VECTOR, the row per work-item everywhere (oclgrind checks it so): all against
 * the reference. */
static void layernorm_over_an_axis_with_and_without_beta(void **state)
{
    (void)state;
    layernorm_over_an_axis_with_and_without_beta_once();
    clrun__ops_kernels = CLRUN__KERNELS_TILED;
    layernorm_over_an_axis_with_and_without_beta_once();
    clrun__ops_kernels = CLRUN__KERNELS_VECTOR;
    layernorm_over_an_axis_with_and_without_beta_once();
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
}

/* Planes of 30 (between one vector and two) and of 99 (four-vector steps, single vectors and a
 * tail), with their channels' gamma and beta. */
static void instancenorm_matches_the_reference(const char *dims, uint64_t seed)
{
    node in = {.op = "instancenorm", .input_count = 3, .in = {type(dims)}};
    const int C = (int)in.in[0].shape[1], planes = (int)(in.in[0].shape[0] * C);
    const int P = (int)(in.in[0].shape[2] * in.in[0].shape[3]);
    in.in[1] = in.in[2] = type("1");
    in.in[1].shape[0] = in.in[2].shape[0] = C;
    in.data[0] = random_floats((uint64_t)(planes * P), -2, 2, seed);
    in.data[1] = random_floats((uint64_t)C, -1, 1, seed + 1);
    in.data[2] = random_floats((uint64_t)C, -1, 1, seed + 2);
    run_node(&in, 1, NULL);
    const size_t count = (size_t)(planes * P);
    double *ref = malloc(count * sizeof *ref), *scale = malloc(count * sizeof *scale);
    for (int plane = 0; plane < planes; plane++) {
        double mean, inv;
        ref_normalise(in.data[0] + plane * P, P, 1e-5, &mean, &inv);
        for (int j = 0; j < P; j++) {
            double x = in.data[0][plane * P + j], y = (x - mean) * inv * in.data[1][plane % C];
            ref[plane * P + j] = y + in.data[2][plane % C];
            scale[plane * P + j] = (fabs(x) + fabs(mean)) * inv * fabs(in.data[1][plane % C]) * 4 +
                                   fabs(in.data[2][plane % C]);
        }
    }
    expect_close(&in, ref, scale, "instancenorm");
    free(ref), free(scale), free(in.result);
    free_node_data(&in, 3);
}

static void instancenorm_and_batchnorm_per_channel_once(void)
{
    instancenorm_matches_the_reference("2,3,5,6", 950);
    instancenorm_matches_the_reference("1,2,9,11", 955);

    /* small planes, and planes of two blocks of a work-item on CPUs (the last one partial) */
    static const struct { const char *x; int inner; } shapes[] = {{"2,4,3,5", 15}, {"1,4,70,70", 4900}};
    for (int k = 0; k < 2; k++) {
        node bn = {.op = "batchnorm", .input_count = 5,
                   .in = {type(shapes[k].x), type("4"), type("4"), type("4"), type("4")}};
        bn.attrs[bn.attr_count++] = attr_float("eps", 1e-3);
        uint64_t count = elements(&bn.in[0]);
        bn.data[0] = random_floats(count, -2, 2, 960 + 10 * (uint64_t)k);
        for (int i = 1; i < 5; i++)
            bn.data[i] = random_floats(4, i == 4 ? 0.1 : -1, 1, 960 + 10 * (uint64_t)k + (uint64_t)i);
        run_node(&bn, 1, NULL);
        double *ref = malloc(count * sizeof *ref), *scale = malloc(count * sizeof *scale);
        for (uint64_t i = 0; i < count; i++) {
            int c = (int)(i / (uint64_t)shapes[k].inner % 4);
            double y = (bn.data[0][i] - bn.data[3][c]) / sqrt(bn.data[4][c] + 1e-3) * bn.data[1][c];
            ref[i] = y + bn.data[2][c];
            scale[i] = fabs(y) * 10 + fabs(bn.data[2][c]);
        }
        expect_close(&bn, ref, scale, "batchnorm");
        free(ref), free(scale), free(bn.result);
        free_node_data(&bn, 5);
    }
}

/* On CPUs a row per work-item; forced TILED, the work-group per row of devices with local
 * memory; forced VECTOR, the row per work-item everywhere (oclgrind checks it so): all against
 * the reference. */
static void instancenorm_and_batchnorm_per_channel(void **state)
{
    (void)state;
    instancenorm_and_batchnorm_per_channel_once();
    clrun__ops_kernels = CLRUN__KERNELS_TILED;
    instancenorm_and_batchnorm_per_channel_once();
    clrun__ops_kernels = CLRUN__KERNELS_VECTOR;
    instancenorm_and_batchnorm_per_channel_once();
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
}

static void softmax_and_logsoftmax_over_any_axis_once(void)
{
    static const struct { const char *x; int64_t axis; } cases[] = {
        {"3,4,37", -1}, {"3,4,37", 1}, {"3,4,37", 0}, {"5,130", 1}, {"2,8,3,3", 1},
        {"2,200", -1}, {"3,7", -1}, /* four-vector steps and a tail; rows shorter than a vector */
        {"2,3,1,2,2,1,3", -1}, {"2,1,3,2,1,2,3,2", 3}, /* ranks 7 and 8 (CLRUN_MAX_DIMS) */
    };
    for (int log_form = 0; log_form < 2; log_form++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            node n = {.op = log_form ? "logsoftmax" : "softmax", .input_count = 1,
                      .in = {type(cases[c].x)}};
            n.attrs[n.attr_count++] = attr_int("axis", cases[c].axis);
            uint64_t total = elements(&n.in[0]);
            n.data[0] = random_floats(total, -6, 6, 1000 + c);
            run_node(&n, 1, NULL);
            int axis = cases[c].axis < 0 ? (int)cases[c].axis + n.in[0].rank : (int)cases[c].axis;
            uint64_t D = (uint64_t)n.in[0].shape[axis], inner = 1;
            for (int d = axis + 1; d < n.in[0].rank; d++)
                inner *= (uint64_t)n.in[0].shape[d];
            double *ref = malloc(total * sizeof *ref), *scale = malloc(total * sizeof *scale);
            for (uint64_t o = 0; o < total / (D * inner); o++)
                for (uint64_t i = 0; i < inner; i++) {
                    const float *x = n.data[0] + o * D * inner + i;
                    double m = -INFINITY, s = 0;
                    for (uint64_t d = 0; d < D; d++)
                        m = fmax(m, x[d * inner]);
                    for (uint64_t d = 0; d < D; d++)
                        s += exp(x[d * inner] - m);
                    for (uint64_t d = 0; d < D; d++) {
                        uint64_t at = o * D * inner + d * inner + i;
                        ref[at] = log_form ? x[d * inner] - m - log(s) : exp(x[d * inner] - m) / s;
                        scale[at] = log_form ? fabs(m) + 12 : 0;
                    }
                }
            expect_close(&n, ref, log_form ? scale : NULL, cases[c].x);
            free(ref), free(scale), free(n.result);
            free_node_data(&n, 1);
        }
}

/* On CPUs a row per work-item; forced TILED, the work-group per row of devices with local
 * memory; forced VECTOR, the row per work-item everywhere (oclgrind checks it so): all against
 * the reference. */
static void softmax_and_logsoftmax_over_any_axis(void **state)
{
    (void)state;
    softmax_and_logsoftmax_over_any_axis_once();
    clrun__ops_kernels = CLRUN__KERNELS_TILED;
    softmax_and_logsoftmax_over_any_axis_once();
    clrun__ops_kernels = CLRUN__KERNELS_VECTOR;
    softmax_and_logsoftmax_over_any_axis_once();
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
}

/* ---- reductions and argmax/argmin -------------------------------------------------------- */

static void every_reduction_over_any_axes_with_keepdims(void **state)
{
    (void)state;
    static const char *const ops[] = {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
                                      "reduce_prod", "reduce_l2", "reduce_sum_square"};
    static const struct { int count; int64_t axes[3]; bool keepdims; const char *out; } cases[] = {
        {1, {1}, true, "3,1,6"}, {2, {0, 2}, false, "5"}, {0, {0}, true, "1,1,1"}, {1, {-1}, false, "3,5"},
    };
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            node n = {.op = ops[o], .input_count = 1, .in = {type("3,5,6")}};
            if (cases[c].count)
                n.attrs[n.attr_count++] = attr_ints("axes", cases[c].count, cases[c].axes);
            n.attrs[n.attr_count++] = attr_int("keepdims", cases[c].keepdims);
            /* prod stays near 1: values in [0.5, 1.5] */
            n.data[0] = random_floats(90, o == 4 ? 0.5 : -2, o == 4 ? 1.5 : 2, 1100 + 10 * o + c);
            run_node(&n, 1, NULL);
            clrun_tensor_type want = type(cases[c].out);
            assert_int_equal(n.out.rank, want.rank);
            for (int d = 0; d < want.rank; d++)
                assert_int_equal(n.out.shape[d], want.shape[d]);
            bool reduced[3] = {cases[c].count == 0, cases[c].count == 0, cases[c].count == 0};
            for (int i = 0; i < cases[c].count; i++)
                reduced[(cases[c].axes[i] + 3) % 3] = true;
            uint64_t count = elements(&n.out);
            double *ref = malloc(count * sizeof *ref), *scale = calloc(count, sizeof *scale);
            double *acc = malloc(count * sizeof *acc);
            uint64_t *cnt = calloc(count, sizeof *cnt);
            for (uint64_t i = 0; i < count; i++)
                acc[i] = o == 2 ? -INFINITY : o == 3 ? INFINITY : o == 4 ? 1 : 0;
            for (int a = 0; a < 3; a++)
                for (int b = 0; b < 5; b++)
                    for (int e = 0; e < 6; e++) {
                        const int idx[3] = {a, b, e}, dims[3] = {3, 5, 6};
                        uint64_t at = 0;
                        for (int d = 0; d < 3; d++)
                            if (!reduced[d])
                                at = at * (uint64_t)dims[d] + (uint64_t)idx[d];
                        double v = n.data[0][(a * 5 + b) * 6 + e];
                        switch (o) {
                        case 2: acc[at] = fmax(acc[at], v); break;
                        case 3: acc[at] = fmin(acc[at], v); break;
                        case 4: acc[at] *= v; break;
                        case 5: case 6: acc[at] += v * v; scale[at] += v * v; break;
                        default: acc[at] += v; scale[at] += fabs(v); break;
                        }
                        cnt[at]++;
                    }
            for (uint64_t i = 0; i < count; i++) {
                ref[i] = o == 1 ? acc[i] / (double)cnt[i] : o == 5 ? sqrt(acc[i]) : acc[i];
                scale[i] = o == 1 ? scale[i] / (double)cnt[i] : o == 5 ? sqrt(scale[i])
                         : o == 4 ? fabs(acc[i]) * (double)cnt[i] : scale[i];
            }
            expect_close(&n, ref, scale, ops[o]);
            free(ref), free(scale), free(acc), free(cnt), free(n.result);
            free_node_data(&n, 1);
        }
}

/* Every reduction at ranks 7 and 8 (CLRUN_MAX_DIMS), on every other axis so that neither the
 * kept nor the reduced dims merge: the kernel's table holds them all; and over runs longer than
 * four vectors with a tail, contiguous and strided, several outputs each (on CPUs a work-item
 * per output). The reference walks the input's coordinates. */
static void every_reduction_at_ranks_7_and_8_and_over_long_runs_once(void)
{
    static const char *const ops[] = {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
                                      "reduce_prod", "reduce_l2", "reduce_sum_square"};
    static const struct {
        const char *x;
        int count;
        int64_t axes[4];
        bool keepdims;
        const char *out;
    } cases[] = {
        {"2,3,2,3,2,3,2", 3, {1, 3, -2}, false, "2,2,2,2"},
        {"2,3,2,3,2,3,2,3", 4, {1, 3, 5, 7}, true, "2,1,2,1,2,1,2,1"},
        {"3,2,3,2,3,2,3,2", 4, {0, 2, 4, 6}, false, "2,2,2,2"},
        {"3,2,77", 1, {2}, false, "3,2"},
        {"3,77,2", 1, {1}, true, "3,1,2"},
        {"2,3,5,7", 2, {2, 3}, true, "2,3,1,1"},
    };
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            node n = {.op = ops[o], .input_count = 1, .in = {type(cases[c].x)}};
            n.attrs[n.attr_count++] = attr_ints("axes", cases[c].count, cases[c].axes);
            n.attrs[n.attr_count++] = attr_int("keepdims", cases[c].keepdims);
            const clrun_tensor_type *x = &n.in[0];
            uint64_t total = elements(x);
            /* prod stays near 1: values in [0.8, 1.2] */
            n.data[0] = random_floats(total, o == 4 ? 0.8 : -2, o == 4 ? 1.2 : 2, 1200 + 10 * o + c);
            run_node(&n, 1, NULL);
            clrun_tensor_type want = type(cases[c].out);
            assert_int_equal(n.out.rank, want.rank);
            for (int d = 0; d < want.rank; d++)
                assert_int_equal(n.out.shape[d], want.shape[d]);
            bool reduced[CLRUN_MAX_DIMS] = {false};
            for (int i = 0; i < cases[c].count; i++)
                reduced[(cases[c].axes[i] + x->rank) % x->rank] = true;
            uint64_t count = elements(&n.out);
            double *ref = malloc(count * sizeof *ref), *scale = calloc(count, sizeof *scale);
            double *acc = malloc(count * sizeof *acc);
            uint64_t *cnt = calloc(count, sizeof *cnt);
            for (uint64_t i = 0; i < count; i++)
                acc[i] = o == 2 ? -INFINITY : o == 3 ? INFINITY : o == 4 ? 1 : 0;
            for (uint64_t i = 0; i < total; i++) {
                uint64_t rem = i, at = 0, stride = 1;
                for (int d = x->rank - 1; d >= 0; d--) {
                    uint64_t dim = (uint64_t)x->shape[d], coordinate = rem % dim;
                    rem /= dim;
                    if (!reduced[d]) {
                        at += coordinate * stride;
                        stride *= dim;
                    }
                }
                double v = n.data[0][i];
                switch (o) {
                case 2: acc[at] = fmax(acc[at], v); break;
                case 3: acc[at] = fmin(acc[at], v); break;
                case 4: acc[at] *= v; break;
                case 5: case 6: acc[at] += v * v; scale[at] += v * v; break;
                default: acc[at] += v; scale[at] += fabs(v); break;
                }
                cnt[at]++;
            }
            for (uint64_t i = 0; i < count; i++) {
                ref[i] = o == 1 ? acc[i] / (double)cnt[i] : o == 5 ? sqrt(acc[i]) : acc[i];
                scale[i] = o == 1 ? scale[i] / (double)cnt[i] : o == 5 ? sqrt(scale[i])
                         : o == 4 ? fabs(acc[i]) * (double)cnt[i] : scale[i];
            }
            expect_close(&n, ref, scale, ops[o]);
            free(ref), free(scale), free(acc), free(cnt), free(n.result);
            free_node_data(&n, 1);
        }
}

/* The reductions in the automatic choice, forced TILED (a work-group per output) and forced
 * VECTOR (a work-item per output everywhere, which oclgrind checks so). */
static void every_reduction_at_ranks_7_and_8_and_over_long_runs(void **state)
{
    (void)state;
    every_reduction_at_ranks_7_and_8_and_over_long_runs_once();
    clrun__ops_kernels = CLRUN__KERNELS_TILED;
    every_reduction_at_ranks_7_and_8_and_over_long_runs_once();
    clrun__ops_kernels = CLRUN__KERNELS_VECTOR;
    every_reduction_at_ranks_7_and_8_and_over_long_runs_once();
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
}

/* Runs node n (f32 or 32-bit inputs, no scratch) once into an output buffer `tail` words
 * longer than its output, poisoned, and fails if the node wrote any of those words; returns
 * the output's words (malloc'd) and the launch (`kernel`'s name, its work-group size). */
static uint32_t *run_with_a_tail(node *n, uint64_t tail, char *kernel, size_t size, size_t *local)
{
    infer_or_fail(n);
    const clrun__op *op = clrun__op_find(n->op);
    const clrun__op_kernels *kernels = clrun__op_kernels_find(op);
    clrun__op_call call = call_of(n);
    void *st = NULL;
    if (kernels->prepare(ctx, op, &call, &st) != CLRUN_OK)
        fail_msg("%s prepare: %s", n->op, clrun_last_error(ctx));
    const clrun__kernel_state *ks = st; /* every state here begins with one */
    assert_int_equal(clGetKernelInfo(ks->kernel, CL_KERNEL_FUNCTION_NAME, size, kernel, NULL), CL_SUCCESS);
    *local = ks->local[0];
    uint64_t count = elements(&n->out);
    cl_int e;
    cl_mem in[4] = {NULL};
    assert_true(n->input_count >= 1 && n->input_count <= 4);
    for (int i = 0; i < n->input_count; i++) {
        in[i] = clCreateBuffer(clrun_context_cl(ctx), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                               elements(&n->in[i]) * 4, (void *)n->data[i], &e);
        assert_int_equal(e, CL_SUCCESS);
    }
    cl_mem out = clCreateBuffer(clrun_context_cl(ctx), CL_MEM_READ_WRITE, (count + tail) * 4, NULL, &e);
    assert_int_equal(e, CL_SUCCESS);
    const cl_uint poison = 0x7fc0dead;
    assert_int_equal(clEnqueueFillBuffer(clrun_context_queue(ctx), out, &poison, 4, 0, (count + tail) * 4, 0,
                                         NULL, NULL),
                     CL_SUCCESS);
    cl_event done = NULL;
    if (kernels->enqueue(ctx, st, &call, in, &out, 0, NULL, &done) != CLRUN_OK)
        fail_msg("%s enqueue: %s", n->op, clrun_last_error(ctx));
    uint32_t *got = malloc((count + tail) * 4);
    assert_int_equal(clEnqueueReadBuffer(clrun_context_queue(ctx), out, CL_TRUE, 0, (count + tail) * 4, got, 1,
                                         &done, NULL),
                     CL_SUCCESS);
    clReleaseEvent(done);
    for (uint64_t t = count; t < count + tail; t++)
        if (got[t] != poison)
            fail_msg("%s: word %llu past the %llu outputs was written", n->op, (unsigned long long)t,
                     (unsigned long long)count);
    for (int i = 0; i < n->input_count; i++)
        clReleaseMemObject(in[i]);
    clReleaseMemObject(out);
    kernels->release(st);
    return got;
}

/* A binary broadcast with one operand along rows and the other constant along them (a
 * squeeze-and-excitation scale, a per-channel bias; either operand first) runs on a CPU a
 * work-item per block of a row in groups of one (ew_source.c's _rows kernel), so rows of 49,
 * 196, 256 and 5000 (two blocks) compile it once; it writes nothing past its output and each
 * element is the single rounding of its product or sum, as on the host. */
static void row_broadcasts_take_groups_of_one_and_give_the_exact_values(void **state)
{
    (void)state;
    static const struct {
        const char *op, *a, *b;
    } cases[] = {{"mul", "1,12,7,7", "1,12,1,1"},   {"mul", "1,5,1,1", "1,5,14,14"},
                 {"add", "2,3,16,16", "1,3,1,1"},   {"mul", "2,5000", "2,1"},
                 {"sub", "3,4,1", "3,4,9"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        node n = {.op = cases[c].op, .input_count = 2, .in = {type(cases[c].a), type(cases[c].b)}};
        n.data[0] = random_floats(elements(&n.in[0]), -2, 2, 1400 + c);
        n.data[1] = random_floats(elements(&n.in[1]), -2, 2, 1410 + c);
        char kernel[128];
        size_t local = 0;
        clrun__ew_rows = 1; /* the CPUs' kernel, on any device (oclgrind checks it) */
        uint32_t *got = run_with_a_tail(&n, 40, kernel, sizeof kernel, &local);
        clrun__ew_rows = -1;
        assert_non_null(strstr(kernel, "_rows"));
        assert_int_equal(local, 1);
        clrun_tensor_type out = n.out;
        uint64_t count = elements(&out), sa[CLRUN_MAX_DIMS], sb[CLRUN_MAX_DIMS];
        clrun__broadcast_strides(&n.in[0], &out, sa);
        clrun__broadcast_strides(&n.in[1], &out, sb);
        for (uint64_t i = 0; i < count; i++) {
            uint64_t rem = i, oa = 0, ob = 0;
            for (int d = out.rank - 1; d >= 0; d--) {
                uint64_t k = rem % (uint64_t)out.shape[d];
                rem /= (uint64_t)out.shape[d];
                oa += k * sa[d], ob += k * sb[d];
            }
            float x = n.data[0][oa], y = n.data[1][ob], v;
            volatile float ref = cases[c].op[0] == 'm' ? x * y : cases[c].op[0] == 'a' ? x + y : x - y;
            memcpy(&v, &got[i], 4);
            if (memcmp(&v, (const void *)&ref, 4) != 0)
                fail_msg("%s %s %s: element %llu is %.9g, the host's %.9g", cases[c].op, cases[c].a,
                         cases[c].b, (unsigned long long)i, v, (double)ref);
        }
        free(got);
        free((void *)n.data[0]);
        free((void *)n.data[1]);
    }
}

/* A reduction along rows one work-item per output (the CPUs' clrun_reduce_rows_sum_f32) launches
 * groups of 16 whatever the count of outputs (one compile, not one per power of two dividing
 * it: squeeze-and-excite's pools over 16, 120 and 7 channels), and the last group's items past
 * the outputs write nothing: the output buffer's tail keeps its poison, and every mean equals
 * the reference. */
static void reduce_rows_take_one_group_size_and_write_only_their_outputs(void **state)
{
    (void)state;
    static const char *const shapes[] = {"16,49", "120,49", "7,196", "1,3136"};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        node n = {.op = "reduce_mean", .input_count = 1, .in = {type(shapes[c])}};
        const int64_t axis = 1;
        n.attrs[n.attr_count++] = attr_ints("axes", 1, &axis);
        n.attrs[n.attr_count++] = attr_int("keepdims", 0);
        uint64_t rows = (uint64_t)n.in[0].shape[0], length = (uint64_t)n.in[0].shape[1];
        n.data[0] = random_floats(rows * length, -2, 2, 1300 + c);
        char kernel[128];
        size_t local = 0;
        uint32_t *got = run_with_a_tail(&n, 40, kernel, sizeof kernel, &local);
        if (strcmp(kernel, "clrun_reduce_rows_sum_f32") == 0)
            assert_int_equal(local, 16);
        for (uint64_t r = 0; r < rows; r++) {
            double ref = 0, scale = 0;
            for (uint64_t j = 0; j < length; j++)
                ref += n.data[0][r * length + j], scale += fabs(n.data[0][r * length + j]);
            float v;
            memcpy(&v, &got[r], 4);
            if (!(fabs((double)v - ref / (double)length) <= 1e-5 * (fabs(ref) + scale) / (double)length))
                fail_msg("%s: mean %llu is %.9g, reference %.9g", shapes[c], (unsigned long long)r, v,
                         ref / (double)length);
        }
        free(got);
        free((void *)n.data[0]);
    }
}

/* A transpose that keeps its runs (ShuffleNetV2's channel shuffle, clrun_copy_runs) takes
 * work-groups of 256 along runs of 128 elements or more, one compile for runs of 784, 196 and
 * 130, and the largest power of two within a shorter run (49: 32); the items past a run copy
 * nothing, every element lands where it belongs and nothing past the output is written. */
static void row_copies_take_groups_of_256_from_runs_of_128(void **state)
{
    (void)state;
    static const struct {
        const char *x;
        size_t local;
    } cases[] = {{"2,6,784", 256}, {"2,29,196", 256}, {"2,5,130", 256}, {"2,58,49", 32}};
    const int64_t perm[3] = {1, 0, 2};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        node n = {.op = "transpose", .input_count = 1, .in = {type(cases[c].x)}};
        n.attrs[n.attr_count++] = attr_ints("perm", 3, perm);
        const int64_t *d = n.in[0].shape;
        n.data[0] = random_floats(elements(&n.in[0]), -2, 2, 1400 + c);
        char kernel[128];
        size_t local = 0;
        uint32_t *got = run_with_a_tail(&n, 300, kernel, sizeof kernel, &local);
        assert_string_equal(kernel, "clrun_copy_runs_u32");
        assert_int_equal(local, cases[c].local);
        for (int64_t a = 0; a < d[0]; a++)
            for (int64_t b = 0; b < d[1]; b++)
                if (memcmp(&got[(b * d[0] + a) * d[2]], &n.data[0][(a * d[1] + b) * d[2]], (size_t)d[2] * 4) != 0)
                    fail_msg("%s: run (%lld, %lld) differs", cases[c].x, (long long)a, (long long)b);
        free(got);
        free((void *)n.data[0]);
    }
}

static void argmax_and_argmin_with_ties_keepdims_and_last_index(void **state)
{
    (void)state;
    for (int is_min = 0; is_min < 2; is_min++)
        for (int last = 0; last < 2; last++)
            for (int axis = -1; axis < 3; axis++) {
                node n = {.op = is_min ? "argmin" : "argmax", .input_count = 1, .in = {type("4,7,5")}};
                n.attrs[n.attr_count++] = attr_int("axis", axis);
                n.attrs[n.attr_count++] = attr_int("keepdims", axis == 1);
                n.attrs[n.attr_count++] = attr_int("select_last_index", last);
                n.data[0] = random_small(140, 5, 1200 + (uint64_t)(axis + 8 * last + 16 * is_min));
                run_node(&n, 1, NULL);
                assert_int_equal(n.out.dtype, CLRUN_I64);
                int a = axis < 0 ? axis + 3 : axis;
                assert_int_equal(n.out.rank, axis == 1 ? 3 : 2);
                const int dims[3] = {4, 7, 5};
                int inner = 1;
                for (int d = a + 1; d < 3; d++)
                    inner *= dims[d];
                const int64_t *got = n.result;
                for (int o = 0; o < 140 / (dims[a] * inner); o++)
                    for (int i = 0; i < inner; i++) {
                        const float *x = n.data[0] + o * dims[a] * inner + i;
                        int best = 0;
                        for (int d = 1; d < dims[a]; d++) {
                            float v = x[d * inner], b = x[best * inner];
                            if (is_min ? (last ? v <= b : v < b) : (last ? v >= b : v > b))
                                best = d;
                        }
                        if (got[o * inner + i] != best)
                            fail_msg("%s axis %d last %d: output %d is %lld, expected %d", n.op, axis,
                                     last, o * inner + i, (long long)got[o * inner + i], best);
                    }
                free(n.result);
                free_node_data(&n, 1);
            }
}

/* ---- refusals ---------------------------------------------------------------------------- */

static void expect_refusal(node *n, const char *want)
{
    const clrun__op *op = clrun__op_find(n->op);
    clrun__op_call call = call_of(n);
    char err[512] = "";
    assert_int_equal(op->infer(&call, &n->out, err, sizeof err), CLRUN_ERROR_INVALID_GRAPH);
    if (strstr(err, want) == NULL)
        fail_msg("%s: refusal '%s' does not say '%s'", n->op, err, want);
}

static void onnx_attributes_are_checked(void **state)
{
    (void)state;
    const int64_t pads3[3] = {1, 1, 1}, pad2[2] = {1, 1}, pads4[4] = {1, 1, 1, 1};
    node a = {.op = "conv2d", .input_count = 2, .in = {type("1,3,8,8"), type("4,3,3,3")},
              .attrs = {attr_ints("pads", 3, pads3)}, .attr_count = 1};
    expect_refusal(&a, "conv2d: attribute 'pads' needs 4 values [top, left, bottom, right], got 3");
    node b = {.op = "conv2d", .input_count = 2, .in = {type("1,3,8,8"), type("4,3,3,3")},
              .attrs = {attr_ints("pads", 4, pads4), attr_ints("pad", 2, pad2)}, .attr_count = 2};
    expect_refusal(&b, "'pad' and 'pads' given together");
    node c = {.op = "avgpool2d", .input_count = 1, .in = {type("1,1,8,8")},
              .attrs = {attr_ints("kernel", 2, pad2), attr_ints("dilation", 2, pad2)}, .attr_count = 2};
    expect_refusal(&c, "avgpool2d: unknown attribute 'dilation'");
    node d = {.op = "softmax", .input_count = 1, .in = {type("2,3")},
              .attrs = {attr_int("axis", 2)}, .attr_count = 1};
    expect_refusal(&d, "softmax: axis 2 is out of range for f32[2, 3]");
    node e = {.op = "softmax", .input_count = 1, .in = {type("2,3")},
              .attrs = {attr_int("axis", 0), attr_int("causal", 1)}, .attr_count = 2};
    expect_refusal(&e, "causal masks the last axis only");
    node f = {.op = "batchnorm", .input_count = 5,
              .in = {type("2,4,3"), type("4"), type("4"), type("3"), type("4")}};
    expect_refusal(&f, "batchnorm: input 3 is f32[3]: expected f32[4] (C)");
    node g = {.op = "conv_transpose2d", .input_count = 2, .in = {type("1,4,5,5"), type("4,3,3,3")},
              .attrs = {attr_ints("output_padding", 2, pad2)}, .attr_count = 1};
    expect_refusal(&g, "output_padding [1, 1] must be below the stride or the dilation");
    node h = {.op = "argmax", .input_count = 1, .in = {type("2,3")},
              .attrs = {attr_int("select_last_index", 2)}, .attr_count = 1};
    expect_refusal(&h, "argmax: attribute 'select_last_index' must be 0 or 1");
    node i = {.op = "layernorm", .input_count = 2, .in = {type("2,3,4"), type("4,3")},
              .attrs = {attr_int("axis", 1)}, .attr_count = 1};
    expect_refusal(&i, "layernorm: gamma is f32[4, 3]: expected f32[12]");
}

/* ---- main -------------------------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    setenv("CLRUN_TUNE", "1", 1); /* the tuner's tests time variants */
    if (clrun_context_create(NULL, &ctx) != CLRUN_OK) {
        fprintf(stderr, "no context: %s\n", clrun_last_error(NULL));
        return -1;
    }
    return 0;
}

/* Each test starts with the kernels and variants chosen as in production. */
static int reset_choices(void **state)
{
    (void)state;
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
    clrun__ops_variant = -1;
    clrun__conv_pointwise_forced = false;
    clrun__conv_pointwise_small = -1;
    clrun__conv_depthwise_channels = -1;
    clrun__conv_rows_forced = false;
    clrun__conv_core_narrow = -1;
    clrun__ew_rows = -1;
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
        cmocka_unit_test_setup(matmul_every_kernel_and_variant_gives_the_same_bits, reset_choices),
        cmocka_unit_test_setup(matmul_epilogue_equals_the_unfused_ops_bit_for_bit, reset_choices),
        cmocka_unit_test_setup(epilogue_that_does_not_build_is_a_clean_error, reset_choices),
        cmocka_unit_test_setup(constant_weights_are_packed_once, reset_choices),
        cmocka_unit_test_setup(tuning_is_remembered_across_contexts, reset_choices),
        cmocka_unit_test_setup(core_groups_are_one_work_item_on_pocl, reset_choices),
        cmocka_unit_test_setup(pools_take_their_kernel_from_the_convolutions_program, reset_choices),
        cmocka_unit_test_setup(constant_weights_packed_at_the_enqueue_give_the_host_bits, reset_choices),
        cmocka_unit_test_setup(one_disturbed_run_does_not_decide, reset_choices),
        cmocka_unit_test_setup(conv2d_every_kernel_and_variant_matches_the_reference, reset_choices),
        cmocka_unit_test_setup(weights_packed_on_the_host_give_the_device_bits, reset_choices),
        cmocka_unit_test_setup(conv2d_epilogue_equals_the_unfused_ops_bit_for_bit, reset_choices),
        cmocka_unit_test_setup(conv2d_pointwise_kernel_gives_the_core_bits, reset_choices),
        cmocka_unit_test_setup(conv2d_pointwise_small_kernel_gives_the_core_bits, reset_choices),
        cmocka_unit_test_setup(conv2d_depthwise_channels_kernel_gives_the_row_kernels_bits, reset_choices),
        cmocka_unit_test_setup(conv2d_depthwise_rows_at_once_give_the_direct_kernels_bits, reset_choices),
        cmocka_unit_test_setup(conv2d_depthwise_row_kernels_each_run_their_path, reset_choices),
        cmocka_unit_test_setup(conv2d_rows_kernel_gives_the_core_bits, reset_choices),
        cmocka_unit_test_setup(conv2d_core_at_half_width_gives_the_full_widths_bits, reset_choices),
        cmocka_unit_test_setup(conv_transpose2d_matches_the_reference, reset_choices),
        cmocka_unit_test_setup(pools_with_onnx_padding_ceil_mode_dilation_and_counts, reset_choices),
        cmocka_unit_test_setup(maxpool_keeps_the_first_of_equal_taps_and_skips_nan, reset_choices),
        cmocka_unit_test_setup(global_maxpool_takes_each_planes_maximum, reset_choices),
        cmocka_unit_test_setup(layernorm_over_an_axis_with_and_without_beta, reset_choices),
        cmocka_unit_test_setup(instancenorm_and_batchnorm_per_channel, reset_choices),
        cmocka_unit_test_setup(softmax_and_logsoftmax_over_any_axis, reset_choices),
        cmocka_unit_test_setup(every_reduction_over_any_axes_with_keepdims, reset_choices),
        cmocka_unit_test_setup(every_reduction_at_ranks_7_and_8_and_over_long_runs, reset_choices),
        cmocka_unit_test_setup(reduce_rows_take_one_group_size_and_write_only_their_outputs, reset_choices),
        cmocka_unit_test_setup(row_broadcasts_take_groups_of_one_and_give_the_exact_values, reset_choices),
        cmocka_unit_test_setup(row_copies_take_groups_of_256_from_runs_of_128, reset_choices),
        cmocka_unit_test_setup(argmax_and_argmin_with_ties_keepdims_and_last_index, reset_choices),
        cmocka_unit_test_setup(onnx_attributes_are_checked, reset_choices),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    clrun_test_remove_dir(cache_dir);
    return failed;
}
