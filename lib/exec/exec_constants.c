/* Constants on the device, placed once when an executor is created.
 *
 * Every constant goes into the pool's resident region (packed exactly, apart from the strategy
 * that serves the intermediates), except one that every node reading it replaces by a packed
 * copy of its own (matmul's and conv2d's weights in panels: the kernels' pack). Such a constant
 * never reaches the device: the nodes lay its values out on the host, one node at a time, and
 * only their copies are uploaded, into resident blocks allocated in one batch with the
 * constants that stay. So a model's weights are resident once, in the form the kernels read,
 * and creating the executor needs no more device memory than that. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"

/* Constants filled from a seed are made on the host in pieces of this many bytes at most, so
 * that a large one never needs its whole size in host memory. */
#define FILL_PIECE (16u << 20)

/* Longest label of a packed copy: "w1 packed for 'h1'". */
#define PACKED_LABEL (2 * CLRUN__GRAPH_NAME_MAX + 16)

/* Uploads one constant into its block: data straight from the graph, a fill piece by piece. */
static clrun_status upload_constant(clrun_exec *e, const clrun__tensor *tensor, clrun_buffer *block)
{
    uint64_t bytes = clrun_tensor_bytes(&tensor->type);
    if (tensor->data)
        return clrun__buffer_write_owned(e->ctx, block, tensor->data);
    size_t size = clrun_dtype_size(tensor->type.dtype);
    uint64_t per_piece = FILL_PIECE / size, elements = bytes / size;
    uint64_t piece = elements < per_piece ? elements : per_piece;
    void *host = malloc((size_t)(piece * size));
    if (host == NULL) {
        char text[CLRUN__BYTES_TEXT];
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                           "out of host memory filling constant '%s' (%s at a time)", tensor->name,
                           clrun__format_bytes(piece * size, text, sizeof text));
    }
    clrun_status status = CLRUN_OK;
    for (uint64_t first = 0; status == CLRUN_OK && first < elements; first += piece) {
        uint64_t count = elements - first < piece ? elements - first : piece;
        clrun__constant_values_range(tensor, first, count, host);
        status = clrun__buffer_write_range(e->ctx, block, first * size, count * size, host);
    }
    free(host);
    return status;
}

/* The values of a constant in host memory: its data, or its fill made whole into *owned, which
 * the caller frees. */
static clrun_status constant_values(clrun_exec *e, const clrun__tensor *tensor, const void **values,
                                    void **owned)
{
    *owned = NULL;
    *values = tensor->data;
    if (tensor->data)
        return CLRUN_OK;
    uint64_t bytes = clrun_tensor_bytes(&tensor->type);
    *owned = malloc((size_t)bytes);
    if (*owned == NULL) {
        char text[CLRUN__BYTES_TEXT];
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                           "out of host memory making constant '%s' (%s) to pack it", tensor->name,
                           clrun__format_bytes(bytes, text, sizeof text));
    }
    clrun__constant_values_range(tensor, 0, bytes / clrun_dtype_size(tensor->type.dtype), *owned);
    *values = *owned;
    return CLRUN_OK;
}

/* What the nodes pack, and which constants their copies replace altogether. */
typedef struct packing_plan {
    uint64_t *bytes;      /* per node: bytes of its packed copy, 0 when it packs nothing */
    uint64_t *replaces;   /* per node: the inputs (bit i: input i) its copy stands for */
    bool *packed_away;    /* per tensor: a constant that every node reading it replaces, and no
                             graph output: never on the device */
    int32_t *replaced;    /* per tensor: the readers (node, input) that replace it */
    int32_t *owner;       /* per node that packs: an earlier node whose copy is the same (the
                             same op, attributes, input types and constants: a recomputed
                             product, a weight read twice alike), read instead; -1: its own */
    int32_t nodes;        /* that pack */
} packing_plan;

static void packing_plan_free(packing_plan *p)
{
    free(p->bytes);
    free(p->replaces);
    free(p->packed_away);
    free(p->replaced);
    free(p->owner);
}

static bool is_constant(const clrun_exec *e, int32_t t)
{
    /* an empty constant takes no memory: it is never uploaded (no node reads one) */
    return e->graph->tensors[t].kind == CLRUN__TENSOR_CONSTANT &&
           !clrun_tensor_empty(&e->graph->tensors[t].type);
}

/* Node i's copy laid out into host (p->bytes[i] bytes), from its constants' values. */
static clrun_status pack_on_host(clrun_exec *e, const packing_plan *p, int32_t i, void *host,
                                 cl_mem packed)
{
    const clrun__node *node = &e->graph->nodes[i];
    const void *inputs[64] = {0};
    void *owned[64] = {0};
    clrun_status status = CLRUN_OK;
    for (int j = 0; status == CLRUN_OK && j < node->input_count; j++)
        if (p->replaces[i] >> j & 1)
            status = constant_values(e, &e->graph->tensors[node->inputs[j]], &inputs[j], &owned[j]);
    if (status == CLRUN_OK)
        status = e->kernels[i]->pack(e->ctx, e->node_states[i], inputs, host, packed);
    for (int j = 0; j < node->input_count && j < 64; j++)
        free(owned[j]);
    return status;
}

/* Whether nodes k and i pack the same copy (a recomputed product, a weight read twice alike):
 * the same constants in the same inputs, and the same bytes laid out. */
static clrun_status packs_alike(clrun_exec *e, const packing_plan *p, int32_t k, int32_t i,
                                bool *alike)
{
    const clrun__node *a = &e->graph->nodes[k], *b = &e->graph->nodes[i];
    *alike = false;
    if (p->bytes[k] != p->bytes[i] || p->replaces[k] != p->replaces[i] ||
        a->input_count != b->input_count)
        return CLRUN_OK;
    for (int j = 0; j < a->input_count; j++)
        if ((p->replaces[k] >> j & 1) && a->inputs[j] != b->inputs[j])
            return CLRUN_OK;
    void *x = malloc((size_t)p->bytes[k]), *y = malloc((size_t)p->bytes[k]);
    clrun_status status = x && y ? CLRUN_OK : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (status == CLRUN_OK)
        status = pack_on_host(e, p, k, x, NULL);
    if (status == CLRUN_OK)
        status = pack_on_host(e, p, i, y, NULL);
    *alike = status == CLRUN_OK && memcmp(x, y, (size_t)p->bytes[k]) == 0;
    free(x);
    free(y);
    return status == CLRUN_ERROR_OUT_OF_HOST_MEMORY
               ? clrun__fail(e->ctx, status, "out of host memory comparing packed weights")
               : status;
}

static clrun_status plan_packing(clrun_exec *e, packing_plan *p)
{
    const clrun_graph *g = e->graph;
    p->bytes = calloc((size_t)g->node_count + 1, sizeof *p->bytes);
    p->replaces = calloc((size_t)g->node_count + 1, sizeof *p->replaces);
    p->packed_away = calloc((size_t)g->tensor_count + 1, sizeof *p->packed_away);
    p->replaced = calloc((size_t)g->tensor_count + 1, sizeof *p->replaced);
    p->owner = calloc((size_t)g->node_count + 1, sizeof *p->owner);
    int32_t *readers = calloc((size_t)g->tensor_count + 1, sizeof *readers);
    if (!p->bytes || !p->replaces || !p->packed_away || !p->replaced || !p->owner || !readers) {
        free(readers);
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for constants");
    }
    clrun_status status = CLRUN_OK;
    for (int32_t i = 0; status == CLRUN_OK && i < g->node_count; i++) {
        const clrun__op_kernels *k = e->kernels[i];
        const clrun__node *node = &g->nodes[i];
        if (k->packed_bytes && k->pack && node->input_count <= 64)
            p->bytes[i] = k->packed_bytes(e->node_states[i], &p->replaces[i]);
        if (p->bytes[i] == 0)
            p->replaces[i] = 0;
        p->nodes += p->bytes[i] > 0;
        for (int j = 0; j < node->input_count; j++) {
            int32_t t = node->inputs[j];
            bool replacing = j < 64 && (p->replaces[i] >> j & 1);
            if (!is_constant(e, t)) {
                if (replacing) /* only a constant's values are known before a run */
                    status = clrun__fail(e->ctx, CLRUN_ERROR_INVALID_GRAPH,
                                         "node '%s' (%s) packs input %d, which is not constant",
                                         clrun__exec_tensor_name(e, node->outputs[0]), node->op->name, j);
                continue;
            }
            readers[t]++;
            p->replaced[t] += replacing;
        }
    }
    for (int32_t i = 0; i < g->node_count; i++) /* the first of each alike set owns */
        p->owner[i] = -1;
    for (int32_t i = 0; status == CLRUN_OK && i < g->node_count; i++)
        for (int32_t k = 0; p->bytes[i] && k < i && p->owner[i] < 0 && status == CLRUN_OK; k++) {
            bool alike = false;
            if (p->bytes[k] && p->owner[k] < 0)
                status = packs_alike(e, p, k, i, &alike);
            if (alike)
                p->owner[i] = k;
        }
    for (int32_t t = 0; t < g->tensor_count; t++)
        p->packed_away[t] = is_constant(e, t) && !g->tensors[t].is_output && readers[t] > 0 &&
                            readers[t] == p->replaced[t];
    free(readers);
    return status;
}

/* The resident blocks: the constants that stay, then the nodes' packed copies, in one batch
 * (so that they share regions reserved to measure). */
static clrun_status allocate_resident(clrun_exec *e, const packing_plan *p)
{
    const clrun_graph *g = e->graph;
    size_t most = (size_t)g->tensor_count + (size_t)g->node_count + 1;
    uint64_t *sizes = calloc(most, sizeof *sizes);
    const char **labels = calloc(most, sizeof *labels);
    clrun_buffer *blocks = calloc(most, sizeof *blocks);
    int32_t *tensor_of = calloc(most, sizeof *tensor_of); /* item -> tensor, or -1 - node */
    char (*packed_labels)[PACKED_LABEL] = calloc((size_t)p->nodes + 1, sizeof *packed_labels);
    clrun_status status = CLRUN_OK;
    if (!sizes || !labels || !blocks || !tensor_of || !packed_labels)
        status = clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for constants");
    size_t count = 0, packers = 0;
    for (int32_t t = 0; status == CLRUN_OK && t < g->tensor_count; t++) {
        if (!is_constant(e, t) || p->packed_away[t])
            continue;
        sizes[count] = clrun_tensor_bytes(&g->tensors[t].type);
        labels[count] = g->tensors[t].name;
        tensor_of[count++] = t;
    }
    for (int32_t i = 0; status == CLRUN_OK && i < g->node_count; i++) {
        if (p->bytes[i] == 0 || p->owner[i] >= 0)
            continue;
        /* Named after the weights it holds; after its node too where they are resident in
         * another form as well (an original that stays, another node's copy). */
        int32_t t = -1;
        for (int j = 0; t < 0 && j < g->nodes[i].input_count; j++)
            if (p->replaces[i] >> j & 1)
                t = g->nodes[i].inputs[j];
        if (t >= 0 && p->packed_away[t] && p->replaced[t] == 1)
            snprintf(packed_labels[packers], PACKED_LABEL, "%s", g->tensors[t].name);
        else
            snprintf(packed_labels[packers], PACKED_LABEL, "%s packed for '%s'",
                     t >= 0 ? g->tensors[t].name : "weights",
                     clrun__exec_tensor_name(e, g->nodes[i].outputs[0]));
        sizes[count] = p->bytes[i];
        labels[count] = packed_labels[packers++];
        tensor_of[count++] = -1 - i;
    }
    if (status == CLRUN_OK && count)
        status = clrun__pool_alloc_resident(e->ctx, sizes, labels, count, blocks);
    for (size_t i = 0; status == CLRUN_OK && i < count; i++) {
        if (tensor_of[i] >= 0)
            e->constants[tensor_of[i]] = blocks[i];
        else
            e->packed[-1 - tensor_of[i]] = blocks[i];
    }
    free(sizes);
    free(labels);
    free(blocks);
    free(tensor_of);
    free(packed_labels);
    return status;
}

/* Node i lays out its copy from its constants' values straight into its resident block, mapped
 * for writing (no staging copy on the host, no write after it); a node reading another's copy
 * lays it out too (its state learns where) into host memory dropped after. */
static clrun_status pack_node(clrun_exec *e, const packing_plan *p, int32_t i)
{
    const clrun__node *node = &e->graph->nodes[i];
    int32_t from = p->owner[i] >= 0 ? p->owner[i] : i;
    if (from == i) {
        void *mapped = NULL;
        clrun_status status = clrun__buffer_map_write(e->ctx, &e->packed[i], &mapped);
        if (status != CLRUN_OK)
            return status;
        status = pack_on_host(e, p, i, mapped, e->packed[i].mem);
        clrun_status unmapped = clrun__buffer_unmap_written(e->ctx, &e->packed[i], mapped);
        return status != CLRUN_OK ? status : unmapped;
    }
    void *host = malloc((size_t)p->bytes[i]);
    if (host == NULL) {
        char text[CLRUN__BYTES_TEXT];
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                           "out of host memory packing the weights of '%s' (%s)",
                           clrun__exec_tensor_name(e, node->outputs[0]),
                           clrun__format_bytes(p->bytes[i], text, sizeof text));
    }
    clrun_status status = pack_on_host(e, p, i, host, e->packed[from].mem);
    free(host);
    return status;
}

clrun_status clrun__exec_place_constants(clrun_exec *e)
{
    const clrun_graph *g = e->graph;
    e->constants = calloc((size_t)g->tensor_count + 1, sizeof *e->constants);
    e->packed = calloc((size_t)g->node_count + 1, sizeof *e->packed);
    if (!e->constants || !e->packed)
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for constants");
    packing_plan p = {0};
    clrun_status status = plan_packing(e, &p);
    if (status == CLRUN_OK)
        status = allocate_resident(e, &p);
    for (int32_t t = 0; status == CLRUN_OK && t < g->tensor_count; t++)
        if (e->constants[t].mem)
            status = upload_constant(e, &g->tensors[t], &e->constants[t]);
    for (int32_t i = 0; status == CLRUN_OK && i < g->node_count; i++)
        if (p.bytes[i])
            status = pack_node(e, &p, i);
    packing_plan_free(&p);
    return status;
}
