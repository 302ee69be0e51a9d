/* What the type rules of the layout, index and resize ops derive and their kernels need too:
 * the index map of every op that only moves elements (a strided view of its input), a slice's
 * ranges after ONNX clamping, pad's and resize's per-axis geometry. Computed from the op call by
 * the same code that checks it, so the kernels can never disagree with infer. Pure C. */
#ifndef CLRUN_LIB_GRAPH_LAYOUT_GEOMETRY_H
#define CLRUN_LIB_GRAPH_LAYOUT_GEOMETRY_H

#include "graph/op.h"

/* concat's most inputs (one launch each). */
#define CLRUN__MAX_CONCAT 32

/* Refuses input i unless its type can exist (rank 0..CLRUN_MAX_DIMS, every dim >= 1, a known
 * dtype): the ops that only move elements take every dtype. */
clrun_status clrun__check_any_dtype(const clrun__op_call *call, int i,
                                    const clrun__infer_error *err);

/* The checks every layout and index op starts with: the input count in [min_inputs,
 * max_inputs], the attributes against specs, then every input with clrun__check_any_dtype. */
clrun_status clrun__check_any_call(const clrun__op_call *call, int min_inputs, int max_inputs,
                                   const clrun__attr_spec *specs, int spec_count,
                                   const clrun__infer_error *err);

/* Refuses an integer attribute `name` outside [lo, hi] ("attribute 'mode' is 3: must be 0 to
 * 2"); absent is fine. */
clrun_status clrun__check_int_range(const clrun__op_call *call, const char *name, int64_t lo,
                                    int64_t hi, const clrun__infer_error *err);

/* ---- views ------------------------------------------------------------------------------- */

/* The index map of an op that copies elements of one input: output element i, at coordinates
 * (c_0 .. c_{rank-1}) of dims (row-major), is input element base + sum c_d * strides[d]. A
 * stride may be 0 (broadcast, tile) or negative (a slice with a negative step). Tile and
 * depth_to_space need up to twice the tensor rank. */
#define CLRUN__VIEW_MAX_RANK (2 * CLRUN_MAX_DIMS)
typedef struct clrun__view {
    int rank;
    int64_t dims[CLRUN__VIEW_MAX_RANK];
    int64_t strides[CLRUN__VIEW_MAX_RANK];
    int64_t base;
} clrun__view;

/* The view of a call of op `name` that passed its infer: transpose, reshape (the identity),
 * slice, split, expand, tile, depth_to_space, space_to_depth. False for any other op. The view
 * comes simplified (clrun__view_simplify). */
bool clrun__view_of(const char *name, const clrun__op_call *call, clrun__view *view);

/* Drops dims of 1 and merges neighbours that the input walks as one (stride[d-1] ==
 * stride[d] * dims[d]), leaving the same map with the fewest dims (at least one). */
void clrun__view_simplify(clrun__view *view);

/* ---- slice and split --------------------------------------------------------------------- */

/* What a slice takes from each axis of its input: elements start, start + step, ... (count of
 * them), after negatives are counted from the end and ONNX's clamping. */
typedef struct clrun__slice_geometry {
    int64_t start[CLRUN_MAX_DIMS];
    int64_t step[CLRUN_MAX_DIMS];
    int64_t count[CLRUN_MAX_DIMS];
} clrun__slice_geometry;

/* The geometry of a slice (either form) or split call; refuses what infer refuses. */
clrun_status clrun__slice_geometry_of(const clrun__op_call *call, const char *op,
                                      clrun__slice_geometry *g, const clrun__infer_error *err);

/* ---- pad --------------------------------------------------------------------------------- */

enum { CLRUN__PAD_CONSTANT = 0, CLRUN__PAD_REFLECT = 1, CLRUN__PAD_EDGE = 2 };

/* The input index that output index `c` of an axis of `n` input elements, padded by `begin`
 * before it, reads in `mode` (reflect and edge), or -1 when it is padding (constant). */
int64_t clrun__pad_source(int64_t c, int64_t begin, int64_t n, int mode);

/* pad's constant as the output dtype's bits (the low clrun_dtype_size bytes, little-endian
 * order of the host). */
uint64_t clrun__pad_value_bits(const clrun__op_call *call);

/* ---- resize ------------------------------------------------------------------------------ */

enum { CLRUN__RESIZE_NEAREST = 0, CLRUN__RESIZE_LINEAR = 1, CLRUN__RESIZE_CUBIC = 2 };
enum {
    CLRUN__COORD_HALF_PIXEL = 0,
    CLRUN__COORD_ASYMMETRIC = 1,
    CLRUN__COORD_ALIGN_CORNERS = 2,
    CLRUN__COORD_PYTORCH_HALF_PIXEL = 3,
    CLRUN__COORD_TF_HALF_PIXEL_FOR_NN = 4,
    CLRUN__COORD_TF_CROP_AND_RESIZE = 5, /* the region of interest roi_start<d>..roi_end<d> */
};
enum {
    CLRUN__NEAREST_ROUND_PREFER_FLOOR = 0,
    CLRUN__NEAREST_ROUND_PREFER_CEIL = 1,
    CLRUN__NEAREST_FLOOR = 2,
    CLRUN__NEAREST_CEIL = 3,
};

/* The taps of one output coordinate on one axis: output = sum over every axis' taps of the
 * product of their weights times the input element at their indices. */
#define CLRUN__RESIZE_MAX_TAPS 4
typedef struct clrun__resize_taps {
    int count;                               /* 1 (nearest, or an axis left as it is) to 4 */
    int64_t index[CLRUN__RESIZE_MAX_TAPS];   /* input indices, inside [0, n) */
    double weight[CLRUN__RESIZE_MAX_TAPS];
} clrun__resize_taps;

/* The taps of output coordinate c of axis `axis` of a resize call that passed its infer. */
void clrun__resize_taps_of(const clrun__op_call *call, int axis, int64_t c,
                           clrun__resize_taps *taps);

/* resize's attributes roi_start<d> and roi_end<d>: tf_crop_and_resize's region of axis d. */
extern const char *const clrun__resize_roi_start_names[CLRUN_MAX_DIMS];
extern const char *const clrun__resize_roi_end_names[CLRUN_MAX_DIMS];

/* The input coordinate of output coordinate c under tf_crop_and_resize, on an axis of n input
 * elements resized to `count` outputs, `length` (the scale times n, not rounded) as the
 * coordinates count it, over the region [start, end] given as fractions of n - 1 (one output:
 * the region's middle): outside [0, n - 1] the output is the extrapolation value. */
double clrun__resize_crop_coordinate(double start, double end, int64_t n, double length, int64_t count,
                                     int64_t c);

/* How many taps every coordinate of `axis` needs: 1 when each picks one input element (nearest,
 * or an axis that keeps its size under an exact map), else the mode's. */
int clrun__resize_axis_taps(const clrun__op_call *call, int axis);

#endif
