/* The OpenCL C of fused groups. Each group is one kernel, one work-item per output element:
 * the group's iteration space (its output's shape without dimensions of 1) is merged into as
 * few dimensions as every read allows; up to three are the NDRange's dimensions (no division),
 * more fold into the third by division by constants. Every distinct read (an input and how it
 * is broadcast) is one load; every op is one call of the same element function the unfused
 * kernel calls (ops/ew_source.h), its attributes as exact literals; the output is the one store.
 * Shapes and strides are literals, so offsets cost a multiply-add by constants, in 32 bits where
 * every offset fits; only a one-dimensional kernel's element count is an argument (its last), so
 * that groups of the same ops at any size are one kernel. Text only: nothing is built here. */
#ifndef CLRUN_LIB_FUSE_CODEGEN_H
#define CLRUN_LIB_FUSE_CODEGEN_H

#include "fuse/draft.h"
#include "fuse/group.h"
#include "ops/fused.h"

/* Group `group` of the plan as a fused op in the arena: its steps in member order, its inputs
 * (the distinct tensors it reads from outside, in order of first read) into *inputs, its name
 * ("fused:add+gelu"), kernel name "clrun_fused_<group>", and its launch. NULL when out of
 * memory. */
clrun__fused_op *clrun__fuse_describe(clrun__arena *arena, const clrun_graph *graph,
                                      const clrun__fuse_plan *plan, int32_t group,
                                      int32_t **inputs);

/* The group members[0..count) (graph order, root last) applied as an epilogue to node `base`
 * (a matmul or conv2d whose output only the group reads): a fused op in the arena whose inputs
 * (into *inputs) are base's then the group's other inputs; NULL when out of memory or base has
 * more inputs than an epilogue base keeps. Its source is made by clrun__fuse_epilogue_source. */
clrun__fused_op *clrun__fuse_describe_epilogue(clrun__arena *arena, const clrun_graph *graph,
                                               int32_t base, const int32_t *members, int32_t count,
                                               int32_t **inputs);

/* The epilogue's OpenCL C (into f->epilogue->helpers and ->expression, arena memory): the
 * prelude, the element functions and clrun_epilogue_fn(v, i, c, x0, ...), which computes the
 * steps from the base op's value v at output index i and returns what the group's last op
 * stores (v itself for an epilogue of no steps). False when out of memory. */
bool clrun__fuse_epilogue_source(clrun__arena *arena, clrun__fused_op *f, bool fp64);

/* Whether f's epilogue may run on float vectors: f32 steps of ops clrun__ew_on_vectors takes,
 * over the product's value, each other and f32 inputs read either at the output's own element
 * (a residual of the output's shape) or along the base's column alone (a per-channel scale).
 * Its source (and a set's whose every case may) then also defines CLRUN_EPILOGUE_V8(v, i, c)
 * and CLRUN_EPILOGUE_V16(v, i, c), the epilogue of a float8 or float16 of the consecutive
 * outputs i, i + 1, ... of one channel c, the inputs read as vectors, lane by lane the scalar
 * one's bits: the convolution kernels that store vectors along a plane (kernels/conv.cl) store
 * through it. */
bool clrun__fuse_epilogue_on_vectors(const clrun__fused_op *f);

/* Whether f's steps compute math (an exp, a tanh, a library call): the base's kernels then
 * store on vectors where they can (kernels/matmul_core.cl's conv store, CLRUN_EPILOGUE_MATH),
 * and a convolution's 3 x 3 depthwise kernels along the rows keep it apart
 * (clrun__conv_epilogue_pays). */
bool clrun__fuse_epilogue_math(const clrun__fused_op *f);

/* One source for the epilogues ops[0..count) (each made by clrun__fuse_epilogue_source first),
 * so that a base op's kernels build once for all of them: the prelude and element functions
 * once, each distinct epilogue as clrun_epilogue_fn_K, and clrun_epilogue_any(epi, v, i, c,
 * x0, ...) switching on the case, a kernel argument. Sets each one's helpers and expression to
 * the set's, its params to the most extra inputs among them and its index to its case + 1 (see
 * ops.h's clrun__epilogue). Epilogues all alike keep their own source, already one program.
 * False when out of memory: the epilogues may then be half changed,
 * and the caller makes each one's own source again. A set holding an op named `poison` (tests,
 * may be NULL) does not compile. */
bool clrun__fuse_epilogue_set_source(clrun__arena *arena, clrun__fused_op **ops, int count, bool fp64,
                                     const char *poison);

/* One program with the kernels of ops[0..count): the prelude, each element function once, the
 * kernels, each distinct kernel text once (an op whose text an earlier op has gets that op's
 * kernel name). malloc'd; NULL when out of memory. `poison`, for tests only, names an op whose
 * groups get a kernel that does not compile. */
char *clrun__fuse_program(clrun__fused_op *const *ops, int count, bool fp64, const char *poison);

#endif
