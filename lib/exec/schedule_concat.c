/* Concats assembled in place: the nodes that make a concat's inputs write them straight into
 * the concat's output buffer, each at its place, so the concat copies nothing and launches
 * nothing (SqueezeNet's fire modules, ShuffleNet's units, an Inception block's branches).
 *
 * A concat may be assembled when every dimension of its output before the axis is 1 (each
 * input one contiguous run of the output: input j is the bytes after inputs 0..j-1) and the
 * graph has no loop run at run time (its body's steps run again). Then each input is placed
 * that:
 *   - is made by an unguarded node on the device, not in place of the node's input nor as a
 *     view of it, and read by the concat alone, once; is not a graph output, not empty, and
 *     not itself an assembled concat's output (no nesting);
 *   - has its place in the output at a multiple of `alignment` (the device's base address
 *     alignment: each is handed to its kernel as a sub-buffer).
 * The concat is assembled, its placed inputs with it, when that keeps the schedule's lower
 * bound: the output's buffer is taken when its first placed input is made, not at the concat,
 * so between the two it holds the bytes of the placed inputs not made yet (nothing when they
 * are made one after the other; a U-Net's skip made long before its concat would hold the
 * decoder's half through the encoder); at the concat the placed inputs and the output no
 * longer coexist, which saves their bytes there. Where only some inputs are placed
 * (ShuffleNetV2's later units: the second half starts 64 bytes off 128), the concat still runs
 * and copies the others.
 * The values are the same bits: the same kernels write the same elements, at other addresses;
 * the concat copies what it would have copied, less the inputs already in place. */
#include "exec/schedule.h"

#include <stdlib.h>
#include <string.h>

#include "graph/layout_geometry.h"
#include "graph/op_geometry.h"

static int64_t axis_of(const clrun__node *node)
{
    for (int i = 0; i < node->attr_count; i++)
        if (node->attrs[i].kind == CLRUN_ATTR_INT && strcmp(node->attrs[i].name, "axis") == 0)
            return node->attrs[i].i;
    return 0;
}

/* Whether every dimension of t before `axis` is 1: each input is then one run of the output. */
static bool one_run_each(const clrun_tensor_type *t, int64_t axis)
{
    axis = clrun__normalize_axis(axis, t->rank);
    if (axis < 0 || axis >= t->rank)
        return false;
    for (int64_t d = 0; d < axis; d++)
        if (t->shape[d] != 1)
            return false;
    return true;
}

/* Which of node n's inputs may be written into its output's buffer (the live profile aside):
 * placed[j], at offset[j]; how many. */
static int assemblable(const clrun_graph *g, const clrun__schedule *s, const clrun__node *n,
                       const int32_t *readers, const int32_t *part_of, uint64_t alignment,
                       uint64_t *offset, bool *placed)
{
    if (strcmp(n->op->name, "concat") != 0 || n->guarded || n->input_count < 2 ||
        n->output_count != 1)
        return 0;
    const clrun__tensor *out = &g->tensors[n->outputs[0]];
    if (!one_run_each(&out->type, axis_of(n)))
        return 0;
    uint64_t at = 0;
    int count = 0;
    for (int j = 0; j < n->input_count; j++) {
        int32_t t = n->inputs[j];
        const clrun__tensor *x = &g->tensors[t];
        uint64_t bytes = clrun_tensor_bytes(&x->type);
        const clrun__node *maker = x->producer >= 0 ? &g->nodes[x->producer] : NULL;
        placed[j] = maker && x->kind == CLRUN__TENSOR_INTERMEDIATE && !x->is_output &&
                    bytes > 0 && readers[t] == 1 && part_of[t] < 0 && s->alias_of[t] < 0 &&
                    at % alignment == 0 && !maker->guarded && !clrun__op_on_host(maker->op) &&
                    !maker->op->view;
        count += placed[j];
        offset[j] = at;
        at += bytes;
    }
    return at == clrun_tensor_bytes(&out->type) ? count : 0;
}

/* Whether writing node n's placed inputs (made at steps made[j], in order) into its output's
 * buffer keeps live[] (per step) within bound; if so, live[] takes the change. The others keep
 * buffers of their own, as before. */
static bool fits(const clrun_graph *g, const clrun__node *n, int32_t step, const int32_t *made,
                 const bool *placed, int64_t *live, int64_t bound)
{
    int64_t whole = (int64_t)clrun_tensor_bytes(&g->tensors[n->outputs[0]].type), parts = 0;
    int32_t from = step;
    for (int j = 0; j < n->input_count; j++)
        if (placed[j]) {
            from = made[j] < from ? made[j] : from;
            parts += (int64_t)clrun_tensor_bytes(&g->tensors[n->inputs[j]].type);
        }
    /* before the concat: the whole buffer, less the placed inputs made by then (alive anyway) */
    for (int pass = 0; pass < 2; pass++)
        for (int32_t st = from; st < step; st++) {
            int64_t change = whole;
            for (int j = 0; j < n->input_count; j++)
                if (placed[j] && made[j] <= st)
                    change -= (int64_t)clrun_tensor_bytes(&g->tensors[n->inputs[j]].type);
            if (pass == 0 && live[st] + change > bound)
                return false;
            if (pass == 1)
                live[st] += change;
        }
    live[step] -= parts; /* the placed inputs and the output no longer both */
    return true;
}

clrun_status clrun__schedule_pick_concats(const clrun_graph *g, const clrun__schedule *s,
                                          uint64_t alignment, int32_t **part_of_out,
                                          uint64_t **part_offset_out, int32_t *picked,
                                          int32_t *whole)
{
    *part_of_out = NULL;
    *part_offset_out = NULL;
    *picked = 0;
    *whole = 0;
    if (!s->reuse || alignment == 0)
        return CLRUN_OK;
    for (int32_t i = 0; i < g->node_count; i++)
        if (clrun__op_is_loop_begin(g->nodes[i].op) || clrun__op_is_loop_end(g->nodes[i].op))
            return CLRUN_OK;
    size_t nt = (size_t)g->tensor_count + 1;
    int32_t *readers = calloc(nt, sizeof *readers);
    int32_t *part_of = malloc(nt * sizeof *part_of);
    uint64_t *part_offset = calloc(nt, sizeof *part_offset);
    int64_t *live = calloc((size_t)s->steps + 1, sizeof *live);
    if (!readers || !part_of || !part_offset || !live) {
        free(readers), free(part_of), free(part_offset), free(live);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    for (int32_t t = 0; t < g->tensor_count; t++)
        part_of[t] = -1;
    for (int32_t i = 0; i < g->node_count; i++) {
        const clrun__node *n = &g->nodes[i];
        for (int k = 0; k < n->input_count; k++)
            readers[n->inputs[k]]++;
        if (n->guarded)
            readers[n->guard]++;
    }
    clrun__schedule_live(s, live);
    int64_t bound = (int64_t)s->lower_bound;
    int32_t count = 0, whole_count = 0;
    for (int32_t step = 0; step < s->steps; step++) {
        const clrun__node *n = &g->nodes[s->order[step]];
        uint64_t offset[CLRUN__MAX_CONCAT];
        int32_t made[CLRUN__MAX_CONCAT];
        bool placed[CLRUN__MAX_CONCAT];
        int parts = n->input_count > CLRUN__MAX_CONCAT
                        ? 0
                        : assemblable(g, s, n, readers, part_of, alignment, offset, placed);
        if (parts == 0)
            continue;
        for (int j = 0; j < n->input_count; j++)
            made[j] = s->producer_step[n->inputs[j]];
        if (!fits(g, n, step, made, placed, live, bound))
            continue;
        int32_t out = n->outputs[0];
        part_of[out] = out;
        for (int j = 0; j < n->input_count; j++)
            if (placed[j]) {
                part_of[n->inputs[j]] = out;
                part_offset[n->inputs[j]] = offset[j];
            }
        count++;
        whole_count += parts == n->input_count;
    }
    free(readers);
    free(live);
    if (count == 0) {
        free(part_of);
        free(part_offset);
        return CLRUN_OK;
    }
    *part_of_out = part_of;
    *part_offset_out = part_offset;
    *picked = count;
    *whole = whole_count;
    return CLRUN_OK;
}
