/* clrun: a float model's weights stored narrower. The weights of its products (matmul's b,
 * conv2d's and conv_transpose2d's filters) are kept resident as f16, bf16 or as int8 with one scale
 * per output channel. matmul (a matrix b) and conv2d read them narrow: their kernels widen each
 * value as they load it, so no f32 copy of the weight exists at run time; a weight that another
 * product reads (conv_transpose2d) is widened back to f32 right before that node, at each run.
 * The resident bytes fall by 2x (f16, bf16) or nearly 4x (int8), and the products compute in f32
 * with the same bits as over the widened weight. The results differ from the f32 model's by the rounding
 * of the weights (f16, bf16: to nearest even; int8: symmetric, q = round(w / s), s = max|w| / 127
 * per output channel), which callers measure against the f32 run (`clrun run --weights` does). */
#ifndef CLRUN_WEIGHTS_H
#define CLRUN_WEIGHTS_H

#include <stdint.h>

#include <clrun/graph.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What clrun_graph_narrow_weights did. */
typedef struct clrun_weights_report {
    int32_t narrowed;        /* weights now stored narrower */
    int32_t kept;            /* product weights left in f32: another node reads them too, they
                                are graph outputs, or a value does not fit the narrow type
                                (beyond f16's or bf16's range; not finite) */
    uint64_t bytes_before;   /* the narrowed weights' f32 bytes */
    uint64_t bytes_after;    /* what they hold now (int8: with their scales) */
} clrun_weights_report;

/* Rewrites `graph` in place: each f32 constant of at least min_elements elements that is read
 * only as the weight (input 1) of matmul, conv2d or conv_transpose2d becomes a constant
 * of dtype `to` (CLRUN_F16, CLRUN_BF16 or CLRUN_I8) named "NAME.f16", "NAME.bf16" or "NAME.i8"
 * (and "NAME.scale", f32[C]). Read only by matmul (as a matrix) and conv2d, it becomes their
 * weight input, i8 with its scale as their last input and the attribute dequant = 1; otherwise
 * it is widened by nodes placed right before its first reader into "NAME.widened". The original
 * constant stays in the graph, read by no node. report (may be NULL) says what was done.
 *
 * CLRUN_ERROR_INVALID_ARGUMENT for another `to` or a negative min_elements, the graph then
 * unchanged; CLRUN_ERROR_OUT_OF_HOST_MEMORY leaves it half rewritten, no longer a graph that
 * runs: destroy it. The message is the graph's last error. */
clrun_status clrun_graph_narrow_weights(clrun_graph *graph, clrun_dtype to, int64_t min_elements,
                                        clrun_weights_report *report);

#ifdef __cplusplus
}
#endif
#endif
