/* Kernels of resize (kernels/resize.cl). The host computes every output coordinate's taps once
 * per node (graph/layout_geometry.h: the same code the tests check against the ONNX reference),
 * so the kernels only add products: nearest picks one element per axis (any dtype, exact), linear
 * and cubic weigh theirs (f32). */
#include <stdlib.h>
#include <string.h>

#include "device/cl.h"
#include "graph/layout_geometry.h"
#include "ops/ops_data.h"
#include "ops/ops_internal.h"

/* Output coordinates of all axes together that one node's tap table may hold (up to 4 taps of
 * 16 bytes each: 256 MiB at most); far above any real image's axes. */
#define MAX_COORDINATES (1 << 22)

/* Outputs a work-item of clrun_resize_planes_f32 computes, in whole rows (a plane whole where
 * it has fewer). */
#define PLANE_OUTPUTS 2048

_Static_assert(CLRUN_MAX_DIMS == 8, "kernels/resize.cl's MAX_RANK is CLRUN_MAX_DIMS");

int clrun__resize_kernels = 2;

static uint64_t float_bits(double weight)
{
    float f = (float)weight;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}

/* The tap table of kernels/resize.cl into a malloc'd array of *count entries. */
static uint64_t *tap_table(const clrun__op_call *call, size_t *count)
{
    const clrun_tensor_type *x = &call->inputs[0], *y = &call->outputs[0];
    int rank = x->rank, taps[CLRUN_MAX_DIMS];
    size_t total = 1 + 3 * (size_t)rank;
    for (int d = 0; d < rank; d++) {
        taps[d] = clrun__resize_axis_taps(call, d);
        total += 2 * (size_t)y->shape[d] * (size_t)taps[d];
    }
    uint64_t *table = calloc(total, sizeof *table);
    if (table == NULL)
        return NULL;
    table[0] = (uint64_t)rank;
    uint64_t stride = 1;
    size_t at = 1 + 3 * (size_t)rank;
    for (int d = rank - 1; d >= 0; d--) {
        table[1 + d] = (uint64_t)y->shape[d];
        table[1 + rank + d] = (uint64_t)taps[d];
        table[1 + 2 * rank + d] = at;
        for (int64_t c = 0; c < y->shape[d]; c++, at += 2 * (size_t)taps[d]) {
            clrun__resize_taps t;
            clrun__resize_taps_of(call, d, c, &t);
            for (int j = 0; j < t.count; j++) {
                table[at + 2 * (size_t)j] = (uint64_t)t.index[j] * stride;
                table[at + 2 * (size_t)j + 1] = float_bits(t.weight[j]);
            }
        }
        stride *= (uint64_t)x->shape[d];
    }
    *count = total;
    return table;
}

static clrun_status resize_prepare(clrun_context *ctx, const clrun__op *op,
                                   const clrun__op_call *call, void **state)
{
    clrun__kernel_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", op->name);
    st->inputs = 1;
    st->what = op->name;
    uint64_t coordinates = 0;
    for (int d = 0; d < call->outputs[0].rank; d++)
        coordinates += (uint64_t)call->outputs[0].shape[d];
    if (coordinates > MAX_COORDINATES) {
        free(st);
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_SIZE, "resize: the output's axes have %llu "
                           "coordinates in all, more than the tap table holds (%d)",
                           (unsigned long long)coordinates, MAX_COORDINATES);
    }
    size_t count = 0;
    uint64_t *table = tap_table(call, &count);
    if (table == NULL) {
        free(st);
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "resize: tap table");
    }
    const clrun_tensor_type *x = &call->inputs[0], *out = &call->outputs[0];
    cl_ulong n = clrun_tensor_elements(out);
    /* an interpolation in the last two axes only: a work-item per block of rows of a plane */
    bool nearest = clrun__attr_int_or(call, "mode", CLRUN__RESIZE_NEAREST) == CLRUN__RESIZE_NEAREST;
    int rank = x->rank;
    bool planes = !nearest && rank >= 2 && n > 0 && clrun__resize_kernels >= 1;
    for (int d = 0; planes && d < rank - 2; d++)
        planes = table[1 + rank + d] == 1;
    /* two taps in each of the last two axes, every leading axis' weight 1 (its one tap) */
    bool linear = planes && clrun__resize_kernels >= 2 && table[1 + rank + rank - 2] == 2 &&
                  table[1 + rank + rank - 1] == 2;
    for (int d = 0; linear && d < rank - 2; d++)
        for (int64_t c = 0; linear && c < out->shape[d]; c++)
            linear = table[table[1 + 2 * rank + d] + 2 * (uint64_t)c + 1] == float_bits(1.0);
    clrun_status s;
    if (nearest)
        s = clrun__element_kernel(ctx, "clrun_resize_nearest", x->dtype, NULL, &st->kernel);
    else
        s = clrun__kernel(ctx, linear ? "clrun_resize_planes_linear_f32"
                               : planes ? "clrun_resize_planes_f32" : "clrun_resize_interp_f32",
                          &st->kernel);
    if (s == CLRUN_OK)
        s = clrun__table_buffer(ctx, table, count * sizeof table[0], &st->table);
    free(table);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 2, sizeof n, &n);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 3, sizeof st->table, &st->table);
    if (s == CLRUN_OK && planes) {
        size_t OH = (size_t)out->shape[out->rank - 2], OW = (size_t)out->shape[out->rank - 1];
        size_t rows = (PLANE_OUTPUTS + OW - 1) / OW;
        rows = rows < OH ? rows : OH;
        st->dims = 2;
        st->global[0] = (OH + rows - 1) / rows;
        st->global[1] = (size_t)(n / (OH * OW));
        st->local[0] = st->local[1] = 1;
    } else if (s == CLRUN_OK) {
        s = clrun__flat_launch(ctx, st, n);
    }
    return clrun__kernel_state_done(st, s, state);
}

static const clrun__op_kernels resize_kernels = {
    .prepare = resize_prepare,
    .enqueue = clrun__kernel_state_op_enqueue,
    .release = clrun__kernel_state_release,
};

const clrun__named_kernels clrun__kernels_resize[] = {{"resize", &resize_kernels}, {NULL, NULL}};
