/* Plain C references of the layout, index and resize ops (docs/ops.md), written from the ONNX
 * operator definitions without the library's helpers, so that they check it independently:
 * loops over every output element, coordinates spelled out. Elements are `size` bytes, moved
 * with memcpy; indices come as int64_t whatever the tested dtype. */
#ifndef CLRUN_TESTS_LAYOUT_REFERENCE_H
#define CLRUN_TESTS_LAYOUT_REFERENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <clrun/graph.h>

/* A shape and its element count, as the references see them. */
typedef struct ref_shape {
    int rank;
    int64_t dims[CLRUN_MAX_DIMS];
} ref_shape;

int64_t ref_count(const ref_shape *s);
ref_shape ref_shape_of(const clrun_tensor_type *t);

/* y = x transposed by perm (out[d] = in[perm[d]]). */
void lref_transpose(size_t size, const ref_shape *x, const void *data, const int64_t *perm,
                    void *out);

/* ONNX Slice: n (starts, ends) pairs on axes (NULL: 0..n-1) with steps (NULL: all 1); *y gets
 * the output shape. Returns false when the result would be empty. */
bool lref_slice(size_t size, const ref_shape *x, const void *data, int n, const int64_t *starts,
                const int64_t *ends, const int64_t *axes, const int64_t *steps, ref_shape *y,
                void *out);

/* Part `index` of x cut along axis into parts of sizes[0..parts) elements. */
void lref_split(size_t size, const ref_shape *x, const void *data, int axis, int parts,
                const int64_t *sizes, int index, void *out);

/* numpy broadcast of x to the shape y. */
void lref_expand(size_t size, const ref_shape *x, const void *data, const ref_shape *y, void *out);

/* y[i] = x[i mod x's dims], y = x times repeats. */
void lref_tile(size_t size, const ref_shape *x, const void *data, const int64_t *repeats,
               void *out);

/* ONNX DepthToSpace (crd false: DCR) and SpaceToDepth on [N, C, H, W]. */
void lref_depth_to_space(size_t size, const ref_shape *x, const void *data, int64_t b, bool crd,
                         void *out);
void lref_space_to_depth(size_t size, const ref_shape *x, const void *data, int64_t b, void *out);

/* ONNX Gather on axis; negative indices count from the end when wrap, and an index outside
 * the axis gives zero bytes. */
void lref_gather(size_t size, const ref_shape *x, const void *data, const ref_shape *indices,
                 const int64_t *index, int axis, bool wrap, void *out);

/* ONNX GatherElements on axis (negatives from the end, outside: zero). */
void lref_gather_elements(size_t size, const ref_shape *x, const void *data,
                          const ref_shape *indices, const int64_t *index, int axis, void *out);

/* numpy pad: pads [begin..., end...], mode 0 constant (value: `size` bytes), 1 reflect, 2 edge. */
void lref_pad(size_t size, const ref_shape *x, const void *data, const int64_t *pads, int mode,
              const void *value, void *out);

/* ONNX Trilu over the last two dims. */
void lref_trilu(size_t size, const ref_shape *x, const void *data, bool upper, int64_t k,
                void *out);

/* ONNX CumSum along axis: floats summed in double into out (one double per element), integers
 * (size 4 or 8) wrapping into out as their own width. */
void lref_cumsum_float(const ref_shape *x, const double *data, int axis, bool exclusive,
                       bool reverse, double *out);
void lref_cumsum_int(size_t size, const ref_shape *x, const void *data, int axis, bool exclusive,
                     bool reverse, void *out);

/* ONNX Resize as the ONNX reference implements it (onnx/backend/test/case/node/resize.py, 1.12):
 * each output coordinate maps back to a fractional input one, which a 1-D interpolation over
 * the nearest taps (edge-padded) resolves, axis by axis. mode 0 nearest, 1 linear, 2 cubic;
 * coordinate modes and nearest modes numbered as docs/ops.md; scales[d] <= 0 means sizes / input.
 * x is read as doubles (callers convert), out gets doubles. */
typedef struct lref_resize_params {
    int mode, coordinate_mode, nearest_mode;
    double cubic_a;
    bool exclude_outside;
    double scales[CLRUN_MAX_DIMS];
} lref_resize_params;
void lref_resize(const ref_shape *x, const double *data, const ref_shape *y,
                 const lref_resize_params *p, double *out);

#endif
