/* The index maps of the ops that only copy elements of one input (graph/layout_geometry.h):
 * each is a strided view of the input, one kernel runs them all. */
#include <string.h>

#include "graph/layout_geometry.h"
#include "graph/op.h"
#include "graph/op_geometry.h"
#include "graph/types.h"

/* Row-major element strides of x. */
static void row_major(const clrun_tensor_type *x, int64_t *strides)
{
    int64_t s = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= x->shape[d];
    }
}

static void add_dim(clrun__view *v, int64_t dim, int64_t stride)
{
    v->dims[v->rank] = dim;
    v->strides[v->rank++] = stride;
}

void clrun__view_simplify(clrun__view *v)
{
    int rank = 0;
    for (int d = 0; d < v->rank; d++) {
        if (v->dims[d] == 1)
            continue;
        if (rank > 0 && v->strides[rank - 1] == v->strides[d] * v->dims[d]) {
            v->dims[rank - 1] *= v->dims[d];
            v->strides[rank - 1] = v->strides[d];
            continue;
        }
        v->dims[rank] = v->dims[d];
        v->strides[rank++] = v->strides[d];
    }
    if (rank == 0) {
        v->dims[0] = 1;
        v->strides[0] = 0;
        rank = 1;
    }
    v->rank = rank;
}

static void transpose_view(const clrun__op_call *call, const int64_t *in, clrun__view *v)
{
    int64_t perm[CLRUN_MAX_ATTR_INTS];
    clrun__attr_list(call, "perm", perm, CLRUN_MAX_ATTR_INTS);
    for (int d = 0; d < call->inputs[0].rank; d++)
        add_dim(v, call->inputs[0].shape[perm[d]], in[perm[d]]);
}

static void slice_view(const clrun__op_call *call, const char *op, const int64_t *in,
                       clrun__view *v)
{
    clrun__slice_geometry g;
    const clrun__infer_error quiet = {op, NULL, 0};
    clrun__slice_geometry_of(call, op, &g, &quiet);
    for (int d = 0; d < call->inputs[0].rank; d++) {
        v->base += g.start[d] * in[d];
        add_dim(v, g.count[d], g.step[d] * in[d]);
    }
}

/* Output dims from the output type (infer filled it), x's dims aligned to the right. */
static void expand_view(const clrun__op_call *call, const int64_t *in, clrun__view *v)
{
    const clrun_tensor_type *x = &call->inputs[0], *y = &call->outputs[0];
    for (int d = 0; d < y->rank; d++) {
        int ix = d - (y->rank - x->rank);
        add_dim(v, y->shape[d], ix >= 0 && x->shape[ix] > 1 ? in[ix] : 0);
    }
}

/* Axis d of the output is (repeat r, element c) of x's axis d: two view dims each. */
static void tile_view(const clrun__op_call *call, const int64_t *in, clrun__view *v)
{
    const clrun_tensor_type *x = &call->inputs[0];
    int64_t repeats[CLRUN_MAX_ATTR_INTS];
    clrun__attr_list(call, "repeats", repeats, CLRUN_MAX_ATTR_INTS);
    for (int d = 0; d < x->rank; d++) {
        add_dim(v, repeats[d], 0);
        add_dim(v, x->shape[d], in[d]);
    }
}

/* Both are ONNX's reshape to 6-D, transpose, reshape back; the view walks the output as
 * [N, C', H, b, W, b] (depth_to_space) or [N, b, b, C, H', W'] (space_to_depth). */
static void depth_to_space_view(const clrun__op_call *call, clrun__view *v)
{
    const clrun_tensor_type *x = &call->inputs[0];
    int64_t b = clrun__attr_int_or(call, "blocksize", 1);
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3], c = C / (b * b);
    int64_t plane = H * W;
    bool crd = clrun__attr_int_or(call, "mode", 0) == 1;
    add_dim(v, N, C * plane);
    add_dim(v, c, crd ? b * b * plane : plane);
    add_dim(v, H, W);
    add_dim(v, b, crd ? b * plane : b * c * plane);
    add_dim(v, W, 1);
    add_dim(v, b, crd ? plane : c * plane);
}

static void space_to_depth_view(const clrun__op_call *call, clrun__view *v)
{
    const clrun_tensor_type *x = &call->inputs[0];
    int64_t b = clrun__attr_int_or(call, "blocksize", 1);
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    add_dim(v, N, C * H * W);
    add_dim(v, b, W);
    add_dim(v, b, 1);
    add_dim(v, C, H * W);
    add_dim(v, H / b, b * W);
    add_dim(v, W / b, b);
}

bool clrun__view_of(const char *name, const clrun__op_call *call, clrun__view *v)
{
    memset(v, 0, sizeof *v);
    int64_t in[CLRUN_MAX_DIMS];
    row_major(&call->inputs[0], in);
    if (strcmp(name, "transpose") == 0)
        transpose_view(call, in, v);
    else if (strcmp(name, "reshape") == 0)
        add_dim(v, (int64_t)clrun_tensor_elements(&call->inputs[0]), 1);
    else if (strcmp(name, "slice") == 0 || strcmp(name, "split") == 0)
        slice_view(call, name, in, v);
    else if (strcmp(name, "expand") == 0)
        expand_view(call, in, v);
    else if (strcmp(name, "tile") == 0)
        tile_view(call, in, v);
    else if (strcmp(name, "depth_to_space") == 0)
        depth_to_space_view(call, v);
    else if (strcmp(name, "space_to_depth") == 0)
        space_to_depth_view(call, v);
    else
        return false;
    clrun__view_simplify(v);
    return true;
}
