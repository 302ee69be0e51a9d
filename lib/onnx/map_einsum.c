/* Einsum (opset 12) of one or two operands, as graph ops: every label that repeats in an operand
 * is a diagonal (the two axes moved last, merged, and a slice of step n + 1), every label that
 * neither the output nor the other operand has is summed away; one operand is then a transpose
 * into the output's order. Two are grouped as a batched product: A as [batch, M, K], B as
 * [batch, K, N] (batch: the labels both have and the output keeps; K: those both have and the
 * output drops; M and N: each one's own), multiplied by `matmul` (else a broadcast `mul` summed
 * over K), the result split into its labels and transposed into the output's order.
 *
 * Labels are the letters; "..." stands for the dims no letter names, aligned to the right across
 * the operands (numpy broadcasting, where a dim of 1 meets a larger one). Without "->" the
 * output is the ellipsis dims, then the letters used once, in ASCII order (numpy's implicit
 * mode). Sums run on `reduce_sum`, else (f64, integers) `cumsum` along the axis and its last
 * element. Refused by name: more than two operands, a summed label whose sizes differ.
 * Det, the determinant of small matrices by its formula, is here too. */
#include <string.h>

#include "onnx/map.h"

#define LETTERS 52                /* a-z, then A-Z */
#define LABELS (LETTERS + CLRUN_MAX_DIMS) /* then the ellipsis dims, left to right */
#define NONE (-1)

/* A value and the label of each of its axes. */
typedef struct term {
    clrun__value *v;
    int rank;
    int label[CLRUN__ONNX_MAX_RANK];
} term;

static int letter_label(char c)
{
    if (c >= 'a' && c <= 'z')
        return c - 'a';
    if (c >= 'A' && c <= 'Z')
        return 26 + c - 'A';
    return NONE;
}

/* ASCII order of the labels for the implicit output: A-Z (26..51), then a-z (0..25). */
static int ascii_rank(int label)
{
    return label < 26 ? label + 26 : label - 26;
}

/* The equation without blanks into buf; refuses one that does not fit. */
static clrun_status squeeze_blanks(clrun__imp *im, const char *eq, char *buf, size_t size)
{
    size_t k = 0;
    for (const char *p = eq; *p; p++) {
        if (*p == ' ' || *p == '\t')
            continue;
        if (k + 1 >= size)
            return clrun__unsupported(im, "the equation is longer than %zu characters", size - 1);
        buf[k++] = *p;
    }
    buf[k] = '\0';
    return CLRUN_OK;
}

/* Parses one subscript (text[0..len)) of an operand of `rank` dims (rank < 0: the output, whose
 * ellipsis has `ellipsis` dims) into labels; *ell gets the dims its ellipsis covers. */
static clrun_status parse_term(clrun__imp *im, const char *text, size_t len, int rank, int ellipsis,
                               int *labels, int *count, int *ell)
{
    int letters = 0;
    bool dots = false;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '.') {
            if (dots || i + 2 >= len + 0 || text[i + 1] != '.' || text[i + 2] != '.')
                return clrun__invalid(im, "a subscript of the equation has a stray or second '.'");
            dots = true;
            i += 2;
        } else if (letter_label(text[i]) == NONE) {
            return clrun__invalid(im, "the equation has '%c', which is not a letter", text[i]);
        } else {
            letters++;
        }
    }
    int e = 0;
    if (rank >= 0) {
        if (letters > rank || (!dots && letters != rank))
            return clrun__invalid(im, "subscript '%.*s' has %d letters for an operand of rank %d",
                                  (int)len, text, letters, rank);
        e = rank - letters;
    } else {
        e = dots ? ellipsis : 0;
    }
    int k = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '.') {
            for (int d = 0; d < e; d++)
                labels[k++] = LETTERS + (rank >= 0 ? ellipsis - e : 0) + d;
            i += 2;
        } else {
            labels[k++] = letter_label(text[i]);
        }
    }
    *count = k;
    *ell = e;
    return CLRUN_OK;
}

static int find_label(const term *t, int label, int from)
{
    for (int d = from; d < t->rank; d++)
        if (t->label[d] == label)
            return d;
    return NONE;
}

/* t transposed to the axes order[0..t->rank), labels following. */
static clrun_status permute(clrun__imp *im, clrun__onode *n, term *t, const int *order, int out)
{
    int perm[CLRUN__ONNX_MAX_RANK], labels[CLRUN__ONNX_MAX_RANK];
    for (int d = 0; d < t->rank; d++) {
        perm[d] = order[d];
        labels[d] = t->label[order[d]];
    }
    memcpy(t->label, labels, sizeof labels);
    return clrun__mv_transpose(im, n, t->v, perm, out, &t->v);
}

/* The diagonal of axes i < j (same label, same size): they move last, merge, and every n + 1st
 * element is kept; the label stays once, last. */
static clrun_status diagonal(clrun__imp *im, clrun__onode *n, term *t, int i, int j)
{
    int64_t size = t->v->c.dims[i];
    if (t->v->c.dims[j] != size)
        return clrun__invalid(im, "a repeated label has sizes %lld and %lld", (long long)size,
                              (long long)t->v->c.dims[j]);
    int order[CLRUN__ONNX_MAX_RANK], k = 0;
    for (int d = 0; d < t->rank; d++)
        if (d != i && d != j)
            order[k++] = d;
    order[k++] = i;
    order[k++] = j;
    clrun_status s = permute(im, n, t, order, -1);
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    for (int d = 0; d < t->rank - 2; d++)
        dims[d] = t->v->c.dims[d];
    dims[t->rank - 2] = size * size;
    if (s == CLRUN_OK)
        s = clrun__mv_reshape(im, n, t->v, t->rank - 1, dims, -1, &t->v);
    t->rank--;
    if (s != CLRUN_OK || size == 1)
        return s;
    int64_t zero = 0, end = size * size, step = size + 1, axis = t->rank - 1;
    clrun_attr a[4] = {clrun__mk_ints("starts", &zero, 1), clrun__mk_ints("ends", &end, 1),
                       clrun__mk_ints("axes", &axis, 1), clrun__mk_ints("steps", &step, 1)};
    return clrun__emit1(im, n, "slice", &t->v, 1, a, 4, -1, &t->v);
}

/* Sums t over the axes set in `sum` (their labels dropped): `reduce_sum` where the graph op takes
 * the dtype, else `cumsum` along each axis and its last element. */
static clrun_status sum_axes(clrun__imp *im, clrun__onode *n, term *t, const bool *sum)
{
    int64_t axes[CLRUN__ONNX_MAX_RANK], dims[CLRUN__ONNX_MAX_RANK];
    int count = 0, k = 0;
    for (int d = 0; d < t->rank; d++) {
        if (sum[d])
            axes[count++] = d;
        else {
            dims[k] = t->v->c.dims[d];
            t->label[k++] = t->label[d];
        }
    }
    if (count == 0)
        return CLRUN_OK;
    clrun_attr a[2] = {clrun__mk_ints("axes", axes, count), clrun__mk_int("keepdims", 0)};
    t->rank = k;
    if (clrun__op_accepts("reduce_sum", &t->v, 1, a, 2))
        return clrun__emit1(im, n, "reduce_sum", &t->v, 1, a, 2, -1, &t->v);
    clrun_status s = CLRUN_OK;
    for (int i = 0; i < count && s == CLRUN_OK; i++) {
        int axis = (int)axes[i];
        int64_t last = t->v->c.dims[axis] - 1;
        if (last == 0)
            continue;
        clrun_attr c = clrun__mk_int("axis", axis);
        s = clrun__emit1(im, n, "cumsum", &t->v, 1, &c, 1, -1, &t->v);
        if (s == CLRUN_OK)
            s = clrun__mv_slice(im, n, t->v, axis, last, 1, -1, &t->v);
    }
    return s == CLRUN_OK ? clrun__mv_reshape(im, n, t->v, k, dims, -1, &t->v) : s;
}

/* Takes every repeated label's diagonal, then sums the labels that `keep` lacks. */
static clrun_status settle(clrun__imp *im, clrun__onode *n, term *t, const bool *keep)
{
    clrun_status s = CLRUN_OK;
    for (int i = 0; i < t->rank && s == CLRUN_OK; i++) {
        int j = find_label(t, t->label[i], i + 1);
        if (j != NONE) {
            s = diagonal(im, n, t, i, j);
            i = -1; /* the axes moved: start over */
        }
    }
    bool sum[CLRUN__ONNX_MAX_RANK];
    for (int d = 0; d < t->rank; d++)
        sum[d] = !keep[t->label[d]];
    return s == CLRUN_OK ? sum_axes(im, n, t, sum) : s;
}

/* The size of label l in t (1 when t lacks it). */
static int64_t label_size(const term *t, int l)
{
    int d = find_label(t, l, 0);
    return d == NONE ? 1 : t->v->c.dims[d];
}

/* *v reshaped to its `first` axes (or their product, with flatten_first), the product of the
 * next `second` and the product of the rest (an empty group: 1), with a dim of 1 inserted before
 * the second group's product (extra_one_at 0), after the third's (2), or nowhere (-1). */
static clrun_status group(clrun__imp *im, clrun__onode *n, clrun__value **v, int first, int second,
                          bool flatten_first, int extra_one_at)
{
    int64_t dims[CLRUN__ONNX_MAX_RANK + 1], m = 1, k = 1, b = 1;
    int rank = 0;
    for (int d = 0; d < (*v)->c.rank; d++) {
        if (d < first && !flatten_first)
            dims[rank++] = (*v)->c.dims[d];
        else if (d < first)
            b *= (*v)->c.dims[d];
        else if (d < first + second)
            m *= (*v)->c.dims[d];
        else
            k *= (*v)->c.dims[d];
    }
    if (flatten_first && first > 0)
        dims[rank++] = b;
    int64_t tail[3] = {m, k, 1};
    int t = 0;
    for (int i = 0; i < 3; i++) {
        if (i == extra_one_at)
            dims[rank++] = 1;
        if (i < 2)
            dims[rank++] = tail[t++];
    }
    if (rank > CLRUN_MAX_DIMS)
        return clrun__unsupported(im, "the product needs %d dims (at most %d)", rank, CLRUN_MAX_DIMS);
    return clrun__mv_reshape(im, n, *v, rank, dims, -1, v);
}

clrun_status clrun__map_einsum(clrun__imp *im, clrun__onode *n)
{
    char eq[256];
    clrun_status s = clrun__oattr_string(im, n, "equation", "", eq, sizeof eq);
    if (s == CLRUN_OK && eq[0] == '\0')
        s = clrun__invalid(im, "Einsum needs an equation");
    if (s == CLRUN_OK)
        s = squeeze_blanks(im, eq, eq, sizeof eq);
    if (s != CLRUN_OK)
        return s;
    char *arrow = strstr(eq, "->");
    size_t left_len = arrow ? (size_t)(arrow - eq) : strlen(eq);
    int operands = 1;
    for (size_t i = 0; i < left_len; i++)
        operands += eq[i] == ',';
    if (operands > 2)
        return clrun__unsupported(im, "Einsum of %d operands is not supported (1 or 2 are)", operands);
    if (operands != n->n_in)
        return clrun__invalid(im, "the equation has %d operands, the node %d inputs", operands, n->n_in);
    if ((s = clrun__need_inputs(im, n, operands)) != CLRUN_OK)
        return s;
    /* the operands' subscripts: first the ellipsis width, then the labels */
    term t[2];
    const char *start = eq;
    int ellipsis = 0, ell[2], count;
    for (int i = 0; i < operands; i++) {
        const char *end = memchr(start, ',', left_len - (size_t)(start - eq));
        size_t len = end ? (size_t)(end - start) : left_len - (size_t)(start - eq);
        t[i].v = n->in[i];
        t[i].rank = n->in[i]->c.rank;
        if (t[i].rank > CLRUN_MAX_DIMS)
            return clrun__unsupported(im, "operand %d has rank %d (at most %d)", i, t[i].rank, CLRUN_MAX_DIMS);
        if ((s = parse_term(im, start, len, t[i].rank, 0, t[i].label, &count, &ell[i])) != CLRUN_OK)
            return s;
        if (ell[i] > ellipsis)
            ellipsis = ell[i];
        start = end ? end + 1 : start + len;
    }
    start = eq;
    for (int i = 0; i < operands; i++) { /* again, now that the ellipsis is known */
        const char *end = memchr(start, ',', left_len - (size_t)(start - eq));
        size_t len = end ? (size_t)(end - start) : left_len - (size_t)(start - eq);
        parse_term(im, start, len, t[i].rank, ellipsis, t[i].label, &count, &ell[i]);
        start = end ? end + 1 : start + len;
    }
    /* the output's labels */
    int out[LABELS], out_rank = 0, uses[LABELS] = {0};
    for (int i = 0; i < operands; i++)
        for (int d = 0; d < t[i].rank; d++)
            uses[t[i].label[d]]++;
    if (arrow) {
        const char *o = arrow + 2;
        if (strchr(o, '-') || strchr(o, '>') || strchr(o, ','))
            return clrun__invalid(im, "the output subscript '%s' is malformed", o);
        if ((s = parse_term(im, o, strlen(o), -1, ellipsis, out, &out_rank, &count)) != CLRUN_OK)
            return s;
    } else {
        for (int e = 0; e < ellipsis; e++)
            out[out_rank++] = LETTERS + e;
        for (int r = 0; r < LETTERS; r++)
            for (int l = 0; l < LETTERS; l++)
                if (ascii_rank(l) == r && uses[l] == 1)
                    out[out_rank++] = l;
    }
    bool keep[2][LABELS] = {{false}}, in_out[LABELS] = {false};
    for (int i = 0; i < out_rank; i++) {
        if (in_out[out[i]] || uses[out[i]] == 0)
            return clrun__invalid(im, "an output label appears twice or in no operand");
        in_out[out[i]] = true;
    }
    if (out_rank > CLRUN_MAX_DIMS)
        return clrun__unsupported(im, "the output has rank %d (at most %d)", out_rank, CLRUN_MAX_DIMS);
    /* each operand keeps the labels of the output and of the other operand */
    for (int i = 0; i < operands; i++)
        for (int l = 0; l < LABELS; l++)
            keep[i][l] = in_out[l] || (operands == 2 && find_label(&t[1 - i], l, 0) != NONE);
    for (int i = 0; i < operands && s == CLRUN_OK; i++)
        s = settle(im, n, &t[i], keep[i]);
    if (s != CLRUN_OK)
        return s;
    int order[CLRUN__ONNX_MAX_RANK] = {0};
    if (operands == 1) {
        for (int i = 0; i < out_rank; i++)
            order[i] = find_label(&t[0], out[i], 0);
        return permute(im, n, &t[0], order, 0);
    }
    /* two: batch (both, kept), contracted (both, summed), left and right (one's own) */
    int batch[LABELS], nb = 0, con[LABELS], nk = 0, lft[LABELS], nm = 0, rgt[LABELS], nn = 0;
    bool flatten = true;
    for (int i = 0; i < out_rank; i++) {
        int l = out[i];
        bool a = find_label(&t[0], l, 0) != NONE, b = find_label(&t[1], l, 0) != NONE;
        if (a && b) {
            int64_t sa = label_size(&t[0], l), sb = label_size(&t[1], l);
            if (sa != sb && sa != 1 && sb != 1)
                return clrun__invalid(im, "a label has sizes %lld and %lld", (long long)sa, (long long)sb);
            flatten = flatten && sa == sb;
            batch[nb++] = l;
        } else if (a) {
            lft[nm++] = l;
        } else {
            rgt[nn++] = l;
        }
    }
    for (int d = 0; d < t[0].rank; d++) {
        int l = t[0].label[d];
        if (in_out[l])
            continue;
        if (label_size(&t[0], l) != label_size(&t[1], l))
            return clrun__unsupported(im, "summed label '%c' has sizes %lld and %lld: broadcasting "
                                      "a summed label is not supported",
                                      l < 26 ? 'a' + l : l < LETTERS ? 'A' + l - 26 : '.',
                                      (long long)label_size(&t[0], l), (long long)label_size(&t[1], l));
        con[nk++] = l;
    }
    int k = 0;
    for (int i = 0; i < nb; i++)
        order[k++] = find_label(&t[0], batch[i], 0);
    for (int i = 0; i < nm; i++)
        order[k++] = find_label(&t[0], lft[i], 0);
    for (int i = 0; i < nk; i++)
        order[k++] = find_label(&t[0], con[i], 0);
    s = permute(im, n, &t[0], order, -1);
    k = 0;
    for (int i = 0; i < nb; i++)
        order[k++] = find_label(&t[1], batch[i], 0);
    for (int i = 0; i < nk; i++)
        order[k++] = find_label(&t[1], con[i], 0);
    for (int i = 0; i < nn; i++)
        order[k++] = find_label(&t[1], rgt[i], 0);
    if (s == CLRUN_OK)
        s = permute(im, n, &t[1], order, -1);
    if (s != CLRUN_OK)
        return s;
    /* the product: [batch, M, K] x [batch, K, N] */
    clrun__value *a = t[0].v, *b = t[1].v, *p = NULL;
    s = group(im, n, &a, nb, nm, flatten, -1);
    if (s == CLRUN_OK)
        s = group(im, n, &b, nb, nk, flatten, -1);
    if (s != CLRUN_OK)
        return s;
    clrun__value *ab[2] = {a, b};
    if (clrun__op_accepts("matmul", ab, 2, NULL, 0)) {
        s = clrun__emit1(im, n, "matmul", ab, 2, NULL, 0, -1, &p);
    } else { /* [batch, M, K, 1] * [batch, 1, K, N], summed over K */
        a = t[0].v, b = t[1].v;
        s = group(im, n, &a, nb, nm, flatten, 2);
        if (s == CLRUN_OK)
            s = group(im, n, &b, nb, nk, flatten, 0);
        if (s == CLRUN_OK)
            s = clrun__emit_binary(im, n, "mul", a, b, -1, &p);
        if (s != CLRUN_OK)
            return s;
        term prod = {p, p->c.rank, {0}};
        bool sum[CLRUN__ONNX_MAX_RANK] = {false};
        sum[p->c.rank - 2] = true;
        for (int d = 0; d < prod.rank; d++)
            prod.label[d] = 0;
        s = sum_axes(im, n, &prod, sum);
        p = prod.v;
    }
    if (s != CLRUN_OK)
        return s;
    /* split into the labels, then into the output's order */
    term r = {p, 0, {0}};
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    for (int i = 0; i < nb; i++) {
        int64_t sa = label_size(&t[0], batch[i]), sb = label_size(&t[1], batch[i]);
        dims[r.rank] = sa > sb ? sa : sb;
        r.label[r.rank++] = batch[i];
    }
    for (int i = 0; i < nm; i++) {
        dims[r.rank] = label_size(&t[0], lft[i]);
        r.label[r.rank++] = lft[i];
    }
    for (int i = 0; i < nn; i++) {
        dims[r.rank] = label_size(&t[1], rgt[i]);
        r.label[r.rank++] = rgt[i];
    }
    s = clrun__mv_reshape(im, n, r.v, r.rank, dims, -1, &r.v);
    for (int i = 0; i < out_rank; i++)
        order[i] = find_label(&r, out[i], 0);
    return s == CLRUN_OK ? permute(im, n, &r, order, 0) : s;
}

/* Det (opset 11): the determinant of each matrix of x [..., M, M], by its formula over the
 * elements for M <= 3 (1: the element; 2: ad − bc; 3: Sarrus' rule), each element a `slice` of
 * the last two axes; larger matrices, which need a pivoted elimination, are refused by name. */
clrun_status clrun__map_det(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0], *e[3][3];
    int rank = x->c.rank;
    if (rank < 2 || x->c.dims[rank - 1] != x->c.dims[rank - 2])
        return clrun__invalid(im, "Det takes square matrices [..., M, M]");
    int64_t M = x->c.dims[rank - 1], dims[CLRUN__ONNX_MAX_RANK];
    if (M > 3)
        return clrun__unsupported(im, "Det of %lld x %lld matrices is not supported (at most 3 x 3)",
                                  (long long)M, (long long)M);
    for (int d = 0; d < rank - 2; d++)
        dims[d] = x->c.dims[d];
    for (int i = 0; i < M && s == CLRUN_OK; i++)
        for (int j = 0; j < M && s == CLRUN_OK; j++) {
            clrun__value *row;
            s = clrun__mv_slice(im, n, x, rank - 2, i, 1, -1, &row);
            if (s == CLRUN_OK)
                s = clrun__mv_slice(im, n, row, rank - 1, j, 1, -1, &e[i][j]);
            if (s == CLRUN_OK)
                s = clrun__mv_reshape(im, n, e[i][j], rank - 2, dims, -1, &e[i][j]);
        }
    if (s != CLRUN_OK)
        return s;
    if (M == 1)
        return clrun__mv_same(im, n, e[0][0], 0, NULL);
    clrun__value *p, *q;
    if (M == 2) {
        s = clrun__emit_binary(im, n, "mul", e[0][0], e[1][1], -1, &p);
        if (s == CLRUN_OK)
            s = clrun__emit_binary(im, n, "mul", e[0][1], e[1][0], -1, &q);
        return s == CLRUN_OK ? clrun__emit_binary(im, n, "sub", p, q, 0, NULL) : s;
    }
    /* a(ei − fh) − b(di − fg) + c(dh − eg) */
    clrun__value *sum = NULL;
    for (int j = 0; j < 3 && s == CLRUN_OK; j++) {
        int j1 = (j + 1) % 3, j2 = (j + 2) % 3; /* cyclic: the signs come out right */
        clrun__value *minor, *part;
        s = clrun__emit_binary(im, n, "mul", e[1][j1], e[2][j2], -1, &p);
        if (s == CLRUN_OK)
            s = clrun__emit_binary(im, n, "mul", e[1][j2], e[2][j1], -1, &q);
        if (s == CLRUN_OK)
            s = clrun__emit_binary(im, n, "sub", p, q, -1, &minor);
        if (s == CLRUN_OK)
            s = clrun__emit_binary(im, n, "mul", e[0][j], minor, -1, &part);
        if (s == CLRUN_OK && sum == NULL)
            sum = part;
        else if (s == CLRUN_OK)
            s = clrun__emit_binary(im, n, "add", sum, part, j == 2 ? 0 : -1, &sum);
    }
    return s;
}
