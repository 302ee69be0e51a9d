/* The recurrent operators RNN, GRU and LSTM, unrolled at load. The sequence length is a
 * dimension of X, fixed when the model loads, so each time step becomes a few graph nodes (a
 * matmul of the recurrence, an add, slices of the gates, their activations and the state's
 * arithmetic), which fusion joins into a few kernels per step and the planner lays out in
 * memory that the next steps reuse. Every direction, activation (with activation_alpha and
 * activation_beta as onnxruntime consumes them), clip, LSTM's input_forget and peepholes, GRU's
 * linear_before_reset, layout 1 (batch-major), sequence_lens (known at load or fed at run
 * time) and the optional inputs and outputs of the spec.
 *
 * The input projection of every step is one matmul per direction, ahead of the steps:
 * W · Xᵀ + bias, [gates·H, S·B]. The state is held transposed, [H, B], so that the product of
 * a step is R · H_{t-1} with the weights as matmul's A operand, which no kernel copies: a
 * constant B operand is packed once per node on CPUs, which would make S resident copies of
 * R. A step of a batch entry past its sequence length leaves the entry's state as it was
 * (`where` on a row of the mask range(S) < lengths, in the step's kernels). Y and the final
 * states are the steps' states joined by `concat`, Y zero past each length (one `where`), then
 * transposed once into the layout asked for. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/op.h"
#include "onnx/map.h"

/* At most this many time steps (each a dozen graph nodes or so, per direction). */
#define MAX_STEPS 16384

enum kind { RNN, GRU, LSTM };

/* The activation functions the spec lists; the alpha and beta each consumes (in the order of
 * the activations, from activation_alpha and activation_beta) and their values when those lists
 * run out, as onnxruntime reads them. */
enum act_fn { RELU, TANH, SIGMOID, AFFINE, LEAKY_RELU, THRESHOLDED_RELU, SCALED_TANH, HARD_SIGMOID, ELU,
              SOFTSIGN, SOFTPLUS, ACT_COUNT };

static const struct act_kind {
    const char *name;
    bool alpha, beta;
    double alpha0, beta0;
} act_kinds[ACT_COUNT] = {
    [RELU] = {"Relu", false, false, 0, 0},
    [TANH] = {"Tanh", false, false, 0, 0},
    [SIGMOID] = {"Sigmoid", false, false, 0, 0},
    [AFFINE] = {"Affine", true, true, 0, 0},
    [LEAKY_RELU] = {"LeakyRelu", true, false, 0.01, 0},
    [THRESHOLDED_RELU] = {"ThresholdedRelu", true, false, 0, 0},
    [SCALED_TANH] = {"ScaledTanh", true, true, 0, 0},
    [HARD_SIGMOID] = {"HardSigmoid", true, true, 0.2, 0.5},
    [ELU] = {"Elu", true, false, 1.0, 0},
    [SOFTSIGN] = {"Softsign", false, false, 0, 0},
    [SOFTPLUS] = {"Softplus", false, false, 0, 0},
};

typedef struct act {
    enum act_fn fn;
    double alpha, beta;
} act;

/* Input indices of the spec. */
enum { IN_X, IN_W, IN_R, IN_B, IN_LENS, IN_H0, IN_C0, IN_P };

typedef struct rec {
    clrun__imp *im;
    clrun__onode *n;
    enum kind kind;
    int gates;                    /* blocks of H rows in W and R: 1 (RNN), 3 (GRU), 4 (LSTM) */
    int per_dir;                  /* activations per direction: 1, 2, 3 */
    int64_t S, B, I, H;           /* steps, batch, input size, hidden size */
    int dirs;                     /* 1 or 2 */
    bool reverse;                 /* the one direction is reverse */
    bool batch_major;             /* layout 1: X [B, S, I], Y [B, S, dirs, H], states [B, dirs, H] */
    bool clipped;                 /* clip given: gate inputs within [-clip, clip] */
    double clip;
    bool input_forget;            /* LSTM: f = 1 - i */
    bool lbr;                     /* GRU: linear_before_reset */
    act acts[6];                  /* per_dir per direction, forward's first */
    clrun__value *x;              /* X as [S·B, I] */
    clrun__value *steps;          /* sequence_lens fed at run time: t < length, [S, B] bool; else NULL */
    const clrun__otensor *lens_c; /* sequence_lens known at load, some shorter than S; else NULL */
    clrun__value *zero, *one;     /* f32 [1, 1] */
} rec;

static bool has_input(const clrun__onode *n, int i)
{
    return i < n->n_in && n->in[i] != NULL;
}

static bool same_name(const char *a, size_t len, const char *b)
{
    if (strlen(b) != len)
        return false;
    for (size_t i = 0; i < len; i++) {
        char x = a[i] >= 'A' && a[i] <= 'Z' ? (char)(a[i] - 'A' + 'a') : a[i];
        char y = b[i] >= 'A' && b[i] <= 'Z' ? (char)(b[i] - 'A' + 'a') : b[i];
        if (x != y)
            return false;
    }
    return true;
}

/* ---- attributes ---- */

/* activations, activation_alpha, activation_beta: per_dir names per direction (one direction's
 * worth is taken for both, as onnxruntime does), else the spec's defaults. */
static clrun_status read_activations(rec *c)
{
    clrun__imp *im = c->im;
    static const enum act_fn defaults[3][3] = {{TANH}, {SIGMOID, TANH}, {SIGMOID, TANH, TANH}};
    double alphas[16], betas[16];
    int na, nb;
    clrun_status s = clrun__oattr_floats(im, c->n, "activation_alpha", alphas, 16, &na);
    if (s == CLRUN_OK)
        s = clrun__oattr_floats(im, c->n, "activation_beta", betas, 16, &nb);
    if (s != CLRUN_OK)
        return s;
    const Onnx__AttributeProto *a = clrun__oattr_find(im, c->n, "activations");
    int want = c->per_dir * c->dirs, count = a ? (int)a->n_strings : 0;
    if (a && ((a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS) || a->n_strings == 0))
        return clrun__invalid(im, "attribute 'activations' must be a list of strings");
    if (a && count != want && !(c->dirs == 2 && count == c->per_dir))
        return clrun__invalid(im, "%d activations for %d direction%s (%d per direction)", count, c->dirs,
                              c->dirs == 2 ? "s" : "", c->per_dir);
    int ia = 0, ib = 0;
    for (int k = 0; k < want; k++) {
        enum act_fn fn = defaults[c->per_dir - 1][k % c->per_dir];
        if (a) {
            const ProtobufCBinaryData *name = &a->strings[k % count];
            fn = ACT_COUNT;
            for (int f = 0; f < ACT_COUNT && fn == ACT_COUNT; f++)
                if (same_name((const char *)name->data, name->len, act_kinds[f].name))
                    fn = (enum act_fn)f;
            if (fn == ACT_COUNT)
                return clrun__unsupported(im, "activation '%.*s' is not one of Relu, Tanh, Sigmoid, Affine, "
                                          "LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, "
                                          "Softsign, Softplus", (int)(name->len > 64 ? 64 : name->len),
                                          (const char *)name->data);
        }
        const struct act_kind *kind = &act_kinds[fn];
        c->acts[k].fn = fn;
        c->acts[k].alpha = !kind->alpha ? 0 : ia < na ? alphas[ia++] : kind->alpha0;
        c->acts[k].beta = !kind->beta ? 0 : ib < nb ? betas[ib++] : kind->beta0;
    }
    return CLRUN_OK;
}

static clrun_status read_attrs(rec *c)
{
    clrun__imp *im = c->im;
    clrun__onode *n = c->n;
    char direction[32];
    int64_t hidden, layout = 0, input_forget = 0, lbr = 0, output_sequence;
    clrun_status s = clrun__oattr_int(im, n, "hidden_size", -1, &hidden);
    if (s == CLRUN_OK)
        s = clrun__oattr_string(im, n, "direction", "forward", direction, sizeof direction);
    if (s == CLRUN_OK && n->version >= 14)
        s = clrun__oattr_int(im, n, "layout", 0, &layout);
    if (s == CLRUN_OK && n->version < 7) /* Y is made when it is named */
        s = clrun__oattr_int(im, n, "output_sequence", 0, &output_sequence);
    if (s == CLRUN_OK && c->kind == LSTM)
        s = clrun__oattr_int(im, n, "input_forget", 0, &input_forget);
    if (s == CLRUN_OK && c->kind == GRU && n->version >= 3)
        s = clrun__oattr_int(im, n, "linear_before_reset", 0, &lbr);
    c->clipped = clrun__oattr_find(im, n, "clip") != NULL;
    if (s == CLRUN_OK)
        s = clrun__oattr_float(im, n, "clip", INFINITY, &c->clip);
    if (s != CLRUN_OK)
        return s;
    if (c->clipped && !(c->clip > 0))
        return clrun__invalid(im, "clip %g is not a positive threshold", c->clip);
    if (strcmp(direction, "forward") && strcmp(direction, "reverse") && strcmp(direction, "bidirectional"))
        return clrun__invalid(im, "direction '%s' is not forward, reverse or bidirectional", direction);
    if (layout != 0 && layout != 1)
        return clrun__invalid(im, "layout %" PRId64 " is not 0 or 1", layout);
    c->dirs = strcmp(direction, "bidirectional") == 0 ? 2 : 1;
    c->reverse = strcmp(direction, "reverse") == 0;
    c->batch_major = layout == 1;
    c->input_forget = input_forget != 0;
    c->lbr = lbr != 0;
    c->H = hidden;
    return read_activations(c);
}

/* ---- inputs ---- */

/* Input i, if present, is a float tensor of this shape. */
static clrun_status check_input(rec *c, int i, const char *name, int rank, const int64_t *dims)
{
    if (!has_input(c->n, i))
        return CLRUN_OK;
    const clrun__otensor *t = &c->n->in[i]->c;
    char got[96], want[96], elem[32];
    if (i != IN_LENS && t->elem != CLRUN__ONNX_FLOAT)
        return clrun__unsupported(c->im, "%s is %s: clrun runs %s on float tensors only", name,
                                  clrun__onnx_elem_name(t->elem, elem, sizeof elem), c->n->op);
    if (i == IN_LENS && (clrun__onnx_elem_is_float(t->elem) || t->elem == CLRUN__ONNX_BOOL))
        return clrun__invalid(c->im, "sequence_lens must hold integers");
    bool fits = t->rank == rank;
    for (int d = 0; fits && d < rank; d++)
        fits = t->dims[d] == dims[d];
    if (!fits)
        return clrun__invalid(c->im, "%s is %s, expected %s", name, clrun__onnx_dims_text(t->rank, t->dims, got, sizeof got),
                              clrun__onnx_dims_text(rank, dims, want, sizeof want));
    return CLRUN_OK;
}

static clrun_status check_inputs(rec *c)
{
    clrun__imp *im = c->im;
    clrun__onode *n = c->n;
    const clrun__otensor *x = &n->in[IN_X]->c, *r = &n->in[IN_R]->c;
    char elem[32];
    if (x->elem != CLRUN__ONNX_FLOAT)
        return clrun__unsupported(im, "X is %s: clrun runs %s on float tensors only",
                                  clrun__onnx_elem_name(x->elem, elem, sizeof elem), n->op);
    if (x->rank != 3)
        return clrun__invalid(im, "X has rank %d, expected 3", x->rank);
    c->S = x->dims[c->batch_major ? 1 : 0];
    c->B = x->dims[c->batch_major ? 0 : 1];
    c->I = x->dims[2];
    if (c->H < 0 && r->rank == 3)
        c->H = r->dims[2];
    if (c->H < 1 || c->H > INT32_MAX / 4)
        return clrun__invalid(im, "hidden_size %" PRId64 " is not a size", c->H);
    if (c->S > MAX_STEPS)
        return clrun__unsupported(im, "a sequence of %" PRId64 " steps is unrolled into too many nodes "
                                  "(at most %d steps)", c->S, MAX_STEPS);
    int64_t G = c->gates * c->H, nd = c->dirs;
    int64_t w[3] = {nd, G, c->I}, rr[3] = {nd, G, c->H}, b[2] = {nd, 2 * G}, lens[1] = {c->B},
            h0[3] = {nd, c->B, c->H}, p[2] = {nd, 3 * c->H};
    if (c->batch_major)
        h0[0] = c->B, h0[1] = nd;
    clrun_status s = check_input(c, IN_W, "W", 3, w);
    if (s == CLRUN_OK)
        s = check_input(c, IN_R, "R", 3, rr);
    if (s == CLRUN_OK)
        s = check_input(c, IN_B, "B", 2, b);
    if (s == CLRUN_OK)
        s = check_input(c, IN_LENS, "sequence_lens", 1, lens);
    if (s == CLRUN_OK)
        s = check_input(c, IN_H0, "initial_h", 3, h0);
    if (s == CLRUN_OK && c->kind == LSTM)
        s = check_input(c, IN_C0, "initial_c", 3, h0);
    if (s == CLRUN_OK && c->kind == LSTM)
        s = check_input(c, IN_P, "P", 2, p);
    if (s == CLRUN_OK && n->n_in > (c->kind == LSTM ? 8 : 6))
        s = clrun__invalid(im, "%s takes at most %d inputs, not %d", n->op, c->kind == LSTM ? 8 : 6, n->n_in);
    if (s == CLRUN_OK && n->n_out > (c->kind == LSTM ? 3 : 2))
        s = clrun__invalid(im, "%s has at most %d outputs, not %d", n->op, c->kind == LSTM ? 3 : 2, n->n_out);
    return s;
}

/* sequence_lens known at load: each within [0, S]. */
static clrun_status check_lengths(rec *c, const clrun__value *v)
{
    for (int64_t b = 0; b < c->B; b++) {
        int64_t len = clrun__otensor_get_int(&v->c, (uint64_t)b);
        if (len < 0 || len > c->S)
            return clrun__invalid(c->im, "sequence_lens[%" PRId64 "] is %" PRId64 ", outside [0, %" PRId64 "]",
                                  b, len, c->S);
    }
    return CLRUN_OK;
}

/* sequence_lens: nothing when absent or every length is S; the lengths known at load; else the
 * mask of the steps each entry has, from the tensor fed at run time: range(S) < lengths, one
 * node that every step reads a row of. */
static clrun_status read_lengths(rec *c)
{
    if (!has_input(c->n, IN_LENS))
        return CLRUN_OK;
    clrun__value *v = c->n->in[IN_LENS];
    if (c->S == 0 || c->B == 0) /* no step to mask (empty_recurrent) */
        return clrun__is_const(v) && clrun__otensor_count(&v->c) ? check_lengths(c, v) : CLRUN_OK;
    if (!clrun__is_const(v)) {
        int64_t dims[2] = {1, c->B}, steps[2] = {c->S, 1};
        clrun__otensor t;
        if (!clrun__otensor_alloc(&t, v->c.elem, 2, steps))
            return CLRUN__OOM(c->im);
        for (int64_t i = 0; i < c->S; i++)
            clrun__otensor_set_int(&t, (uint64_t)i, i);
        clrun__value *range = clrun__const_value(c->im, &t), *lens;
        if (range == NULL)
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        clrun_status s = clrun__mv_reshape(c->im, c->n, v, 2, dims, -1, &lens);
        return s == CLRUN_OK ? clrun__emit_binary(c->im, c->n, "less", range, lens, -1, &c->steps) : s;
    }
    clrun_status s = check_lengths(c, v);
    bool full = true;
    for (int64_t b = 0; b < c->B; b++)
        full = full && clrun__otensor_get_int(&v->c, (uint64_t)b) == c->S;
    c->lens_c = full ? NULL : &v->c;
    return s;
}

/* ---- emitting ---- */

static clrun_status unary(rec *c, const char *op, clrun__value *x, clrun__value **r)
{
    return clrun__emit_unary(c->im, c->n, op, x, -1, r);
}

static clrun_status binary(rec *c, const char *op, clrun__value *a, clrun__value *b, clrun__value **r)
{
    return clrun__emit_binary(c->im, c->n, op, a, b, -1, r);
}

/* a + b; on the host when both are constants (the biases). */
static clrun_status sum(rec *c, clrun__value *a, clrun__value *b, clrun__value **r)
{
    if (!clrun__is_const(a) || !clrun__is_const(b))
        return binary(c, "add", a, b, r);
    clrun__otensor t;
    if (!clrun__otensor_copy(&t, &a->c))
        return CLRUN__OOM(c->im);
    for (uint64_t i = 0; i < clrun__otensor_count(&t); i++)
        clrun__otensor_set_real(&t, i, (double)(float)(clrun__otensor_get_real(&a->c, i) +
                                                       clrun__otensor_get_real(&b->c, i)));
    return clrun__mv_const(c->im, c->n, &t, -1, r);
}

/* a · b (a: [M, K], b: [K, N], or b transposed); zeros for K = 0 (an input size of 0: X and W
 * empty, the sums of nothing). */
static clrun_status product(rec *c, clrun__value *a, clrun__value *b, bool tb, clrun__value **r)
{
    if (clrun__otensor_count(&a->c) == 0 || clrun__otensor_count(&b->c) == 0) {
        int64_t dims[2] = {a->c.dims[0], tb ? b->c.dims[0] : b->c.dims[1]};
        return clrun__mv_fill(c->im, c->n, a->c.elem, 0, 2, dims, -1, r);
    }
    clrun__value *in[2] = {a, b};
    clrun_attr at = clrun__mk_int("transpose_b", tb);
    return clrun__emit1(c->im, c->n, "matmul", in, 2, &at, 1, -1, r);
}

/* Rows [block·H, (block + count)·H) of a [rows, B] value. */
static clrun_status rows(rec *c, clrun__value *x, int64_t block, int64_t count, clrun__value **r)
{
    return clrun__mv_slice(c->im, c->n, x, 0, block * c->H, count * c->H, -1, r);
}

/* Direction d of a per-direction input, on axis `axis`, reshaped to dims. */
static clrun_status dir_part(rec *c, int i, int axis, int d, int rank, const int64_t *dims, clrun__value **r)
{
    clrun_status s = clrun__mv_slice(c->im, c->n, c->n->in[i], axis, d, 1, -1, r);
    return s == CLRUN_OK ? clrun__mv_reshape(c->im, c->n, *r, rank, dims, -1, r) : s;
}

/* f(x), with x clipped first when `gate` (the clip applies to the inputs of the gates'
 * activations, not to LSTM's h(C)). */
static clrun_status activate(rec *c, const act *a, bool gate, clrun__value *x, clrun__value **r)
{
    clrun__imp *im = c->im;
    clrun__onode *n = c->n;
    clrun_status s = CLRUN_OK;
    if (gate && c->clipped) {
        clrun_attr bounds[2] = {clrun__mk_float("min", -c->clip), clrun__mk_float("max", c->clip)};
        if ((s = clrun__emit1(im, n, "clip", &x, 1, bounds, 2, -1, &x)) != CLRUN_OK)
            return s;
    }
    clrun_attr at[2] = {clrun__mk_float("alpha", a->alpha), clrun__mk_float("beta", a->beta)};
    switch (a->fn) {
    case RELU:
        return unary(c, "relu", x, r);
    case TANH:
        return unary(c, "tanh", x, r);
    case SIGMOID:
        return unary(c, "sigmoid", x, r);
    case SOFTSIGN:
        return unary(c, "softsign", x, r);
    case SOFTPLUS:
        return unary(c, "softplus", x, r);
    case AFFINE:
        return clrun__emit1(im, n, "scale", &x, 1, at, 2, -1, r);
    case HARD_SIGMOID:
        return clrun__emit1(im, n, "hard_sigmoid", &x, 1, at, 2, -1, r);
    case LEAKY_RELU:
        return clrun__emit1(im, n, "leaky_relu", &x, 1, at, 1, -1, r);
    case ELU:
        return clrun__emit1(im, n, "elu", &x, 1, at, 1, -1, r);
    case SCALED_TANH: { /* alpha · tanh(beta · x) */
        clrun_attr scale_in = clrun__mk_float("alpha", a->beta);
        s = clrun__emit1(im, n, "scale", &x, 1, &scale_in, 1, -1, &x);
        if (s == CLRUN_OK)
            s = unary(c, "tanh", x, &x);
        return s == CLRUN_OK ? clrun__emit1(im, n, "scale", &x, 1, at, 1, -1, r) : s;
    }
    case THRESHOLDED_RELU: { /* x > alpha ? x : 0 */
        clrun__value *alpha = clrun__scalar_value(im, CLRUN__ONNX_FLOAT, a->alpha, 2), *above;
        if (alpha == NULL)
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        s = binary(c, "greater", x, alpha, &above);
        clrun__value *in[3] = {above, x, c->zero};
        return s == CLRUN_OK ? clrun__emit1(im, n, "where", in, 3, NULL, 0, -1, r) : s;
    }
    case ACT_COUNT:
        break;
    }
    return clrun__invalid(im, "internal: activation %d", (int)a->fn);
}

/* The mask of the batch entries that step t belongs to, [1, B] bool; NULL when all do. */
static clrun_status step_mask(rec *c, int64_t t, clrun__value **m)
{
    *m = NULL;
    if (c->steps)
        return clrun__mv_slice(c->im, c->n, c->steps, 0, t, 1, -1, m);
    if (c->lens_c == NULL)
        return CLRUN_OK;
    int64_t dims[2] = {1, c->B};
    clrun__otensor mask;
    bool all = true;
    if (!clrun__otensor_alloc(&mask, CLRUN__ONNX_BOOL, 2, dims))
        return CLRUN__OOM(c->im);
    for (int64_t b = 0; b < c->B; b++) {
        bool in = t < clrun__otensor_get_int(c->lens_c, (uint64_t)b);
        clrun__otensor_set_int(&mask, (uint64_t)b, in);
        all = all && in;
    }
    if (all) {
        clrun__otensor_free(&mask);
        return CLRUN_OK;
    }
    return clrun__mv_const(c->im, c->n, &mask, -1, m);
}

/* Whether v is a constant of zeros only (exporters write the default initial state so). */
static bool all_zero(const clrun__value *v)
{
    if (!clrun__is_const(v))
        return false;
    for (uint64_t i = 0; i < clrun__otensor_count(&v->c); i++)
        if (clrun__otensor_get_real(&v->c, i) != 0)
            return false;
    return true;
}

/* One direction's weights, transposed state and the recurrence's parts. */
typedef struct dir {
    const act *acts;              /* per_dir activations */
    clrun__value *r;              /* R [G·H, H] */
    clrun__value *r_zr, *r_h;     /* GRU without linear_before_reset: R's z and r rows, its h rows */
    clrun__value *rb;             /* GRU with linear_before_reset: Rb [3H, 1]; else NULL */
    clrun__value *p[3];           /* LSTM peepholes i, o, f [H, 1]; NULL without P */
    clrun__value *xp;             /* W · Xᵀ + bias, [G·H, S·B] */
    clrun__value *h, *cell;       /* the state [H, B], NULL while zero */
} dir;

/* The input of gate block k (count blocks) of a step: its rows of the input projection xt plus
 * those of the recurrence's product mm (when there is one). Each gate adds its own rows, so
 * that the gates' arithmetic reads the product and the projection directly, in the kernels
 * fusion makes of it, and no sum of every gate is stored between them. */
static clrun_status gate_input(rec *c, clrun__value *xt, clrun__value *mm, int64_t k, int64_t count,
                               clrun__value **r)
{
    clrun__value *a, *b;
    clrun_status s = rows(c, xt, k, count, &a);
    if (s != CLRUN_OK || mm == NULL) {
        *r = a;
        return s;
    }
    if ((s = rows(c, mm, k, count, &b)) != CLRUN_OK)
        return s;
    return binary(c, "add", a, b, r);
}

/* The candidate state of one step from xt, its input projection [G·H, B]: *h (and LSTM's
 * *cell). */
static clrun_status step_rnn(rec *c, dir *dr, clrun__value *xt, clrun__value **h)
{
    clrun__value *pre = xt, *mm;
    clrun_status s = CLRUN_OK;
    if (dr->h && (s = product(c, dr->r, dr->h, false, &mm)) == CLRUN_OK)
        s = binary(c, "add", xt, mm, &pre);
    return s == CLRUN_OK ? activate(c, &dr->acts[0], true, pre, h) : s;
}

static clrun_status step_gru(rec *c, dir *dr, clrun__value *xt, clrun__value **h)
{
    clrun__value *mm = NULL, *pre, *z, *r, *hh, *t;
    clrun_status s = CLRUN_OK;
    if (dr->h) /* without linear_before_reset, the product of the z and r rows first */
        s = product(c, c->lbr ? dr->r : dr->r_zr, dr->h, false, &mm);
    if (s == CLRUN_OK && c->lbr && dr->rb) /* Rb: the z and r rows' too, in the product */
        s = mm ? binary(c, "add", mm, dr->rb, &mm) : clrun__mv_same(c->im, c->n, dr->rb, -1, &mm);
    if (s == CLRUN_OK && (s = gate_input(c, xt, mm, 0, 1, &pre)) == CLRUN_OK)
        s = activate(c, &dr->acts[0], true, pre, &z);
    if (s == CLRUN_OK && (s = gate_input(c, xt, mm, 1, 1, &pre)) == CLRUN_OK)
        s = activate(c, &dr->acts[0], true, pre, &r);
    if (s == CLRUN_OK)
        s = rows(c, xt, 2, 1, &pre);
    if (s == CLRUN_OK && c->lbr && mm) { /* ht = g(Xt·Whᵀ + rt ⊙ (Ht-1·Rhᵀ + Rbh) + Wbh) */
        if ((s = rows(c, mm, 2, 1, &t)) == CLRUN_OK && (s = binary(c, "mul", r, t, &t)) == CLRUN_OK)
            s = binary(c, "add", pre, t, &pre);
    } else if (s == CLRUN_OK && !c->lbr && dr->h) { /* ht = g(Xt·Whᵀ + (rt ⊙ Ht-1)·Rhᵀ + Rbh + Wbh) */
        if ((s = binary(c, "mul", r, dr->h, &t)) == CLRUN_OK && (s = product(c, dr->r_h, t, false, &t)) == CLRUN_OK)
            s = binary(c, "add", pre, t, &pre);
    }
    if (s == CLRUN_OK)
        s = activate(c, &dr->acts[1], true, pre, &hh);
    if (s != CLRUN_OK)
        return s;
    /* Ht = (1 - zt) ⊙ ht + zt ⊙ Ht-1, as ht + zt ⊙ (Ht-1 - ht) (PyTorch's form), which reads zt
     * once: the whole step after its products is one fused kernel. */
    if (dr->h == NULL) {
        if ((s = binary(c, "sub", c->one, z, &t)) == CLRUN_OK)
            s = binary(c, "mul", t, hh, h);
        return s;
    }
    if ((s = binary(c, "sub", dr->h, hh, &t)) == CLRUN_OK && (s = binary(c, "mul", z, t, &t)) == CLRUN_OK)
        s = binary(c, "add", hh, t, h);
    return s;
}

static clrun_status step_lstm(rec *c, dir *dr, clrun__value *xt, clrun__value *m, clrun__value **h,
                              clrun__value **cell)
{
    clrun__value *mm = NULL, *g[4], *t, *i, *f, *cc, *o, *ct;
    clrun_status s = CLRUN_OK;
    if (dr->h)
        s = product(c, dr->r, dr->h, false, &mm);
    for (int k = 0; s == CLRUN_OK && k < 4; k++) /* i, o, f, c */
        s = gate_input(c, xt, mm, k, 1, &g[k]);
    if (s == CLRUN_OK && dr->cell && dr->p[0]) { /* peepholes on Ct-1: i and f */
        if ((s = binary(c, "mul", dr->p[0], dr->cell, &t)) == CLRUN_OK)
            s = binary(c, "add", g[0], t, &g[0]);
        if (s == CLRUN_OK && !c->input_forget && (s = binary(c, "mul", dr->p[2], dr->cell, &t)) == CLRUN_OK)
            s = binary(c, "add", g[2], t, &g[2]);
    }
    if (s == CLRUN_OK)
        s = activate(c, &dr->acts[0], true, g[0], &i);
    if (s == CLRUN_OK)
        s = c->input_forget ? binary(c, "sub", c->one, i, &f) : activate(c, &dr->acts[0], true, g[2], &f);
    if (s == CLRUN_OK)
        s = activate(c, &dr->acts[1], true, g[3], &ct);
    /* Ct = ft ⊙ Ct-1 + it ⊙ ct */
    if (s == CLRUN_OK)
        s = binary(c, "mul", i, ct, dr->cell ? &ct : cell);
    if (s == CLRUN_OK && dr->cell && (s = binary(c, "mul", f, dr->cell, &t)) == CLRUN_OK)
        s = binary(c, "add", t, ct, cell);
    /* Past an entry's length its cell stays; Ht reads that cell (an entry's Ht there is
     * discarded), so that the candidate cell has one reader and fuses. */
    if (s == CLRUN_OK && m) {
        clrun__value *keep[3] = {m, *cell, dr->cell ? dr->cell : c->zero};
        s = clrun__emit1(c->im, c->n, "where", keep, 3, NULL, 0, -1, cell);
    }
    cc = s == CLRUN_OK ? *cell : NULL;
    if (s == CLRUN_OK && dr->p[1] && (s = binary(c, "mul", dr->p[1], cc, &t)) == CLRUN_OK) /* Po ⊙ Ct */
        s = binary(c, "add", g[1], t, &g[1]);
    if (s == CLRUN_OK)
        s = activate(c, &dr->acts[0], true, g[1], &o);
    /* Ht = ot ⊙ h(Ct) */
    if (s == CLRUN_OK)
        s = activate(c, &dr->acts[2], false, cc, &t);
    return s == CLRUN_OK ? binary(c, "mul", o, t, h) : s;
}

/* Direction d's weights: W·Xᵀ + bias for every step, R in the parts the steps read, P, the
 * initial states transposed. */
static clrun_status prepare_direction(rec *c, int d, dir *dr)
{
    clrun__imp *im = c->im;
    clrun__onode *n = c->n;
    int64_t G = c->gates * c->H, H = c->H;
    int64_t wd[2] = {G, c->I}, rd[2] = {G, H}, bd[1] = {2 * G}, col[2] = {G, 1}, hd[2] = {c->B, H};
    clrun__value *w, *b, *wb = NULL, *rb = NULL, *bias = NULL;
    memset(dr, 0, sizeof *dr);
    dr->acts = &c->acts[d * c->per_dir];
    clrun_status s = dir_part(c, IN_W, 0, d, 2, wd, &w);
    if (s == CLRUN_OK)
        s = dir_part(c, IN_R, 0, d, 2, rd, &dr->r);
    if (s == CLRUN_OK && has_input(n, IN_B)) {
        if ((s = dir_part(c, IN_B, 0, d, 1, bd, &b)) == CLRUN_OK && (s = clrun__mv_slice(im, n, b, 0, 0, G, -1, &wb)) == CLRUN_OK)
            s = clrun__mv_slice(im, n, b, 0, G, G, -1, &rb);
        if (s == CLRUN_OK && (s = clrun__mv_reshape(im, n, wb, 2, col, -1, &wb)) == CLRUN_OK)
            s = clrun__mv_reshape(im, n, rb, 2, col, -1, &rb);
        /* Rb joins Wb in the input projection, but for GRU's linear_before_reset, where Rbh
         * is inside rt ⊙ (...) */
        if (s == CLRUN_OK && c->kind == GRU && c->lbr)
            bias = wb, dr->rb = rb;
        else if (s == CLRUN_OK)
            s = sum(c, wb, rb, &bias);
    }
    if (s == CLRUN_OK)
        s = product(c, w, c->x, true, &dr->xp);
    if (s == CLRUN_OK && bias)
        s = binary(c, "add", dr->xp, bias, &dr->xp);
    if (s == CLRUN_OK && c->kind == GRU && !c->lbr) {
        if ((s = rows(c, dr->r, 0, 2, &dr->r_zr)) == CLRUN_OK)
            s = rows(c, dr->r, 2, 1, &dr->r_h);
    }
    if (s == CLRUN_OK && c->kind == LSTM && has_input(n, IN_P)) {
        int64_t pd[1] = {3 * H}, pcol[2] = {H, 1};
        clrun__value *p;
        s = dir_part(c, IN_P, 0, d, 1, pd, &p);
        for (int k = 0; s == CLRUN_OK && k < 3; k++)
            if ((s = clrun__mv_slice(im, n, p, 0, k * H, H, -1, &dr->p[k])) == CLRUN_OK)
                s = clrun__mv_reshape(im, n, dr->p[k], 2, pcol, -1, &dr->p[k]);
    }
    static const int flip[2] = {1, 0};
    for (int k = 0; k < 2 && s == CLRUN_OK; k++) {
        int i = k ? IN_C0 : IN_H0;
        clrun__value **state = k ? &dr->cell : &dr->h;
        if ((k && c->kind != LSTM) || !has_input(n, i) || all_zero(n->in[i]))
            continue; /* a zero state is no state: the first step skips its product */
        if ((s = dir_part(c, i, c->batch_major ? 1 : 0, d, 2, hd, state)) == CLRUN_OK)
            s = clrun__mv_transpose(im, n, *state, flip, -1, state);
    }
    return s;
}

/* Runs direction d over the steps (backward: from the last), leaving each step's state [H, B]
 * in ys[t] and the final state in *h and *cell. Past a batch entry's length the entry's state
 * stays as it was (Y's zeros there come after, from one mask of all steps). */
static clrun_status run_direction(rec *c, int d, bool backward, clrun__value **ys, clrun__value **h,
                                  clrun__value **cell)
{
    dir dr;
    clrun_status s = prepare_direction(c, d, &dr);
    for (int64_t k = 0; s == CLRUN_OK && k < c->S; k++) {
        int64_t t = backward ? c->S - 1 - k : k;
        clrun__value *xt, *m = NULL, *hc = NULL, *cc = NULL;
        if ((s = clrun__mv_slice(c->im, c->n, dr.xp, 1, t * c->B, c->B, -1, &xt)) == CLRUN_OK)
            s = step_mask(c, t, &m);
        if (s == CLRUN_OK)
            s = c->kind == LSTM ? step_lstm(c, &dr, xt, m, &hc, &cc)
                : c->kind == GRU ? step_gru(c, &dr, xt, &hc) : step_rnn(c, &dr, xt, &hc);
        if (s == CLRUN_OK && m) {
            clrun__value *keep[3] = {m, hc, dr.h ? dr.h : c->zero};
            s = clrun__emit1(c->im, c->n, "where", keep, 3, NULL, 0, -1, &hc);
        }
        ys[t] = dr.h = hc;
        dr.cell = cc;
    }
    *h = dr.h;
    *cell = dr.cell;
    return s;
}

/* Y's mask, [S, 1, 1, B] bool: step t of entry b is before the entry's length; NULL when
 * every step of every entry is. */
static clrun_status output_mask(rec *c, clrun__value **m)
{
    int64_t dims[4] = {c->S, 1, 1, c->B};
    *m = NULL;
    if (c->steps)
        return clrun__mv_reshape(c->im, c->n, c->steps, 4, dims, -1, m);
    if (c->lens_c == NULL)
        return CLRUN_OK;
    clrun__otensor t;
    if (!clrun__otensor_alloc(&t, CLRUN__ONNX_BOOL, 4, dims))
        return CLRUN__OOM(c->im);
    for (int64_t i = 0; i < c->S; i++)
        for (int64_t b = 0; b < c->B; b++)
            clrun__otensor_set_int(&t, (uint64_t)(i * c->B + b), i < clrun__otensor_get_int(c->lens_c, (uint64_t)b));
    return clrun__mv_const(c->im, c->n, &t, -1, m);
}

/* xs[0..count) joined on axis 0 into *r, in groups of what concat takes (xs is overwritten). */
static clrun_status join(rec *c, clrun__value **xs, int64_t count, clrun__value **r)
{
    const clrun__op *op = clrun__op_find("concat");
    int most = op && op->max_inputs >= 2 ? (op->max_inputs < 64 ? op->max_inputs : 64) : 2;
    clrun_status s = CLRUN_OK;
    while (s == CLRUN_OK && count > 1) {
        int64_t groups = 0;
        for (int64_t i = 0; s == CLRUN_OK && i < count; i += most) {
            int m = count - i < most ? (int)(count - i) : most;
            s = clrun__mv_concat(c->im, c->n, xs + i, m, 0, -1, &xs[groups++]);
        }
        count = groups;
    }
    *r = xs[0];
    return s;
}

/* Output `out` from pieces [H, B] (count of them, in order) joined as [count, H, B], reshaped to
 * [lead..., H, B], zero where mask is false (when given) and transposed by perm. */
static clrun_status define_output(rec *c, int out, clrun__value **pieces, int64_t count, int rank,
                                  const int64_t *dims, clrun__value *mask, const int *perm)
{
    int64_t one[3] = {1, c->H, c->B};
    clrun_status s = CLRUN_OK;
    clrun__value *joined;
    for (int64_t k = 0; s == CLRUN_OK && k < count; k++)
        s = clrun__mv_reshape(c->im, c->n, pieces[k], 3, one, -1, &pieces[k]);
    if (s == CLRUN_OK)
        s = join(c, pieces, count, &joined);
    if (s == CLRUN_OK)
        s = clrun__mv_reshape(c->im, c->n, joined, rank, dims, -1, &joined);
    if (s == CLRUN_OK && mask) {
        clrun__value *in[3] = {mask, joined, c->zero};
        s = clrun__emit1(c->im, c->n, "where", in, 3, NULL, 0, -1, &joined);
    }
    return s == CLRUN_OK ? clrun__mv_transpose(c->im, c->n, joined, perm, out, NULL) : s;
}

/* X with no step or no batch entry, known at load: Y is empty, and so are Y_h and Y_c for a
 * batch of 0; with no step they are the initial states (or zeros), which no step changed. */
static clrun_status empty_recurrent(rec *c)
{
    int64_t yd[4] = {c->S, c->dirs, c->B, c->H}, hd[3] = {c->dirs, c->B, c->H};
    if (c->batch_major) {
        yd[0] = c->B, yd[1] = c->S, yd[2] = c->dirs;
        hd[0] = c->B, hd[1] = c->dirs;
    }
    clrun_status s = CLRUN_OK;
    if (clrun__out(c->im, c->n, 0))
        s = clrun__mv_empty(c->im, c->n, CLRUN__ONNX_FLOAT, 4, yd, 0, NULL);
    for (int k = 1; s == CLRUN_OK && k <= (c->kind == LSTM ? 2 : 1); k++) {
        int i = k == 1 ? IN_H0 : IN_C0;
        if (k >= c->n->n_out || !clrun__out(c->im, c->n, k))
            continue;
        if (c->B == 0)
            s = clrun__mv_empty(c->im, c->n, CLRUN__ONNX_FLOAT, 3, hd, k, NULL);
        else if (has_input(c->n, i))
            s = clrun__mv_same(c->im, c->n, c->n->in[i], k, NULL);
        else
            s = clrun__mv_fill(c->im, c->n, CLRUN__ONNX_FLOAT, 0, 3, hd, k, NULL);
    }
    return s;
}

static clrun_status map_recurrent(clrun__imp *im, clrun__onode *n, enum kind kind)
{
    rec c = {.im = im, .n = n, .kind = kind};
    c.gates = kind == LSTM ? 4 : kind == GRU ? 3 : 1;
    c.per_dir = kind == LSTM ? 3 : kind == GRU ? 2 : 1;
    clrun_status s = clrun__need_inputs(im, n, 3);
    if (s == CLRUN_OK)
        s = read_attrs(&c);
    if (s == CLRUN_OK)
        s = check_inputs(&c);
    if (s == CLRUN_OK)
        s = read_lengths(&c);
    if (s != CLRUN_OK)
        return s;
    if (c.S == 0 || c.B == 0)
        return empty_recurrent(&c);
    if ((c.zero = clrun__scalar_value(im, CLRUN__ONNX_FLOAT, 0, 2)) == NULL ||
        (c.one = clrun__scalar_value(im, CLRUN__ONNX_FLOAT, 1, 2)) == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    /* X as [S·B, I], time-major */
    int64_t x2[2] = {c.S * c.B, c.I};
    static const int swap[3] = {1, 0, 2};
    c.x = n->in[IN_X];
    if (c.batch_major)
        s = clrun__mv_transpose(im, n, c.x, swap, -1, &c.x);
    if (s == CLRUN_OK)
        s = clrun__mv_reshape(im, n, c.x, 2, x2, -1, &c.x);
    /* ys: the steps' outputs, [S][dirs] */
    int64_t count = c.S * c.dirs;
    clrun__value **ys = calloc((size_t)count, sizeof *ys), **step = calloc((size_t)c.S, sizeof *step);
    clrun__value *h_last[2] = {NULL, NULL}, *c_last[2] = {NULL, NULL};
    if (ys == NULL || step == NULL)
        s = CLRUN__OOM(im);
    for (int d = 0; s == CLRUN_OK && d < c.dirs; d++) {
        s = run_direction(&c, d, d == 1 || c.reverse, step, &h_last[d], &c_last[d]);
        for (int64_t t = 0; t < c.S; t++)
            ys[t * c.dirs + d] = step[t];
    }
    /* Y: [S, dirs, H, B] to [S, dirs, B, H], or [B, S, dirs, H] batch-major */
    static const int y_time[4] = {0, 1, 3, 2}, y_batch[4] = {3, 0, 1, 2};
    static const int h_time[3] = {0, 2, 1}, h_batch[3] = {2, 0, 1};
    int64_t yd[4] = {c.S, c.dirs, c.H, c.B}, hd[3] = {c.dirs, c.H, c.B};
    clrun__value *mask = NULL;
    if (s == CLRUN_OK && clrun__out(im, n, 0) && (s = output_mask(&c, &mask)) == CLRUN_OK)
        s = define_output(&c, 0, ys, count, 4, yd, mask, c.batch_major ? y_batch : y_time);
    if (s == CLRUN_OK && n->n_out > 1 && clrun__out(im, n, 1))
        s = define_output(&c, 1, h_last, c.dirs, 3, hd, NULL, c.batch_major ? h_batch : h_time);
    if (s == CLRUN_OK && kind == LSTM && n->n_out > 2 && clrun__out(im, n, 2))
        s = define_output(&c, 2, c_last, c.dirs, 3, hd, NULL, c.batch_major ? h_batch : h_time);
    free(ys);
    free(step);
    return s;
}

clrun_status clrun__map_rnn(clrun__imp *im, clrun__onode *n)
{
    return map_recurrent(im, n, RNN);
}

clrun_status clrun__map_gru(clrun__imp *im, clrun__onode *n)
{
    return map_recurrent(im, n, GRU);
}

clrun_status clrun__map_lstm(clrun__imp *im, clrun__onode *n)
{
    return map_recurrent(im, n, LSTM);
}
