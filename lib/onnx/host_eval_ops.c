/* Folding of the elementwise operators whose inputs are all host constants: integer shape
 * arithmetic above all (Add, Sub, Mul, Div of int64 dims), comparisons, logic and Where of shape
 * masks, and the exactly rounded float operations. What the host does not evaluate here (Exp of
 * a constant, Pow of floats) reaches the device as a node over constants. */
#include <string.h>

#include "onnx/host_eval.h"
#include "onnx/map.h"

typedef struct binop_row {
    const char *op;
    clrun__host_binop code;
} binop_row;

static const binop_row binops[] = {
    {"Add", CLRUN__H_ADD}, {"Sub", CLRUN__H_SUB}, {"Mul", CLRUN__H_MUL}, {"Div", CLRUN__H_DIV},
    {"Mod", CLRUN__H_MOD}, {"Min", CLRUN__H_MIN}, {"Max", CLRUN__H_MAX}, {"Sum", CLRUN__H_ADD},
    {"Pow", CLRUN__H_POW}, {"Equal", CLRUN__H_EQUAL}, {"Less", CLRUN__H_LESS},
    {"Greater", CLRUN__H_GREATER}, {"LessOrEqual", CLRUN__H_LESS_EQUAL},
    {"GreaterOrEqual", CLRUN__H_GREATER_EQUAL}, {"And", CLRUN__H_AND}, {"Or", CLRUN__H_OR},
    {"Xor", CLRUN__H_XOR},
};

typedef struct unop_row {
    const char *op;
    clrun__host_unop code;
} unop_row;

static const unop_row unops[] = {
    {"Neg", CLRUN__H_NEG}, {"Abs", CLRUN__H_ABS}, {"Sqrt", CLRUN__H_SQRT},
    {"Floor", CLRUN__H_FLOOR}, {"Ceil", CLRUN__H_CEIL}, {"Round", CLRUN__H_ROUND},
    {"Sign", CLRUN__H_SIGN}, {"Not", CLRUN__H_NOT}, {"Relu", CLRUN__H_RELU},
    {"Reciprocal", CLRUN__H_RECIPROCAL},
};

static clrun_status result(clrun__imp *im, clrun__onode *n, clrun__host_fold_result r,
                           clrun__otensor *out)
{
    switch (r) {
    case CLRUN__FOLD_OK: return clrun__define_const(im, n, 0, out);
    case CLRUN__FOLD_NO_MEMORY: return CLRUN__OOM(im);
    case CLRUN__FOLD_DIV_ZERO: return clrun__invalid(im, "integer division by zero in constants");
    case CLRUN__FOLD_CANNOT: break;
    }
    return CLRUN__NOT_FOLDED;
}

/* b as numpy broadcasting sees it, for binary ops before opset 7 (their broadcast and axis). */
static clrun_status legacy_b(clrun__imp *im, clrun__onode *n, const clrun__value *a, const clrun__value *b,
                             clrun__otensor *view, bool *reshaped)
{
    int rank;
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    bool legacy;
    *reshaped = false;
    clrun_status s = clrun__legacy_broadcast(im, n, a, b, &rank, dims, &legacy);
    if (s != CLRUN_OK || !legacy)
        return s;
    if (!clrun__host_reshape(&b->c, rank, dims, view))
        return CLRUN__OOM(im);
    *reshaped = true;
    return CLRUN_OK;
}

static clrun_status fold_binary(clrun__imp *im, clrun__onode *n, clrun__host_binop op)
{
    if (n->n_in < 1 || n->in[0] == NULL)
        return CLRUN__NOT_FOLDED;
    if (strcmp(n->op, "Mod") == 0) {
        int64_t fmod;
        clrun_status s = clrun__oattr_int(im, n, "fmod", 0, &fmod);
        if (s != CLRUN_OK)
            return s;
        if (fmod)
            op = CLRUN__H_FMOD;
    }
    clrun__otensor acc;
    if (!clrun__otensor_copy(&acc, &n->in[0]->c))
        return clrun__fold_budget_refused() ? CLRUN__NOT_FOLDED : CLRUN__OOM(im);
    for (int i = 1; i < n->n_in; i++) {
        if (n->in[i] == NULL) {
            clrun__otensor_free(&acc);
            return CLRUN__NOT_FOLDED;
        }
        clrun__otensor view, next;
        bool reshaped;
        clrun_status s = legacy_b(im, n, n->in[0], n->in[i], &view, &reshaped);
        if (s != CLRUN_OK) {
            clrun__otensor_free(&acc);
            return s;
        }
        clrun__host_fold_result r = clrun__host_binary(op, &acc, reshaped ? &view : &n->in[i]->c, &next);
        if (reshaped)
            clrun__otensor_free(&view);
        clrun__otensor_free(&acc);
        if (r != CLRUN__FOLD_OK)
            return result(im, n, r, &next);
        acc = next;
    }
    return clrun__define_const(im, n, 0, &acc);
}

clrun_status clrun__fold(clrun__imp *im, clrun__onode *n)
{
    clrun__otensor out;
    if (strcmp(n->op, "Where") == 0) {
        if (n->n_in != 3 || !n->in[0] || !n->in[1] || !n->in[2] || n->in[0]->c.elem != CLRUN__ONNX_BOOL ||
            n->in[1]->c.elem != n->in[2]->c.elem)
            return CLRUN__NOT_FOLDED;
        if (!clrun__host_where(&n->in[0]->c, &n->in[1]->c, &n->in[2]->c, &out))
            return CLRUN__NOT_FOLDED;
        return clrun__define_const(im, n, 0, &out);
    }
    if (n->version < 6)
        clrun__oattr_ignore(im, n, "consumed_inputs");
    for (size_t i = 0; i < sizeof unops / sizeof unops[0]; i++)
        if (strcmp(n->op, unops[i].op) == 0) {
            if (n->n_in != 1 || n->in[0] == NULL)
                return CLRUN__NOT_FOLDED;
            return result(im, n, clrun__host_unary(unops[i].code, &n->in[0]->c, &out), &out);
        }
    for (size_t i = 0; i < sizeof binops / sizeof binops[0]; i++)
        if (strcmp(n->op, binops[i].op) == 0) {
            /* Pow folds for integers only: float pow is not exactly rounded. */
            if (binops[i].code == CLRUN__H_POW &&
                (n->n_in != 2 || clrun__onnx_elem_is_float(n->in[0]->c.elem) ||
                 n->in[0]->c.elem != n->in[1]->c.elem))
                return CLRUN__NOT_FOLDED;
            return fold_binary(im, n, binops[i].code);
        }
    return CLRUN__NOT_FOLDED;
}
