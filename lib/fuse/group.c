/* Planning elementwise groups: see group.h. */
#include "fuse/group.h"

#include <stdlib.h>
#include <string.h>

#include "graph/elementwise.h"

bool clrun__same_iteration_space(const clrun_tensor_type *a, const clrun_tensor_type *b)
{
    int i = 0, j = 0;
    for (;;) {
        while (i < a->rank && a->shape[i] == 1)
            i++;
        while (j < b->rank && b->shape[j] == 1)
            j++;
        if (i == a->rank || j == b->rank)
            return i == a->rank && j == b->rank;
        if (a->shape[i++] != b->shape[j++])
            return false;
    }
}

static bool dtype_runs(clrun_dtype dtype, bool fp64)
{
    return clrun__ew_dtype_supported(dtype) && dtype != CLRUN_F16 && dtype != CLRUN_BF16 &&
           (dtype != CLRUN_F64 || fp64);
}

bool clrun__fuse_is_layout(const clrun__op *op)
{
    static const char *const moves[] = {"transpose", "reshape", "slice", "split", "expand", "tile",
                                        "depth_to_space", "space_to_depth"};
    for (size_t i = 0; op && i < sizeof moves / sizeof moves[0]; i++)
        if (strcmp(op->name, moves[i]) == 0)
            return true;
    return false;
}

typedef enum member_kind { NOT_FUSIBLE = 0, ELEMENTWISE, LAYOUT } member_kind;

/* An elementwise node, or a layout node of one input, whose dtypes the device runs. */
static member_kind kind_of(const clrun_graph *g, int32_t n, const clrun__fuse_limits *limits)
{
    const clrun__node *node = &g->nodes[n];
    if (node->op == NULL || node->output_count != 1 || (limits->excluded && limits->excluded[n]))
        return NOT_FUSIBLE;
    member_kind kind = clrun__ew_def_of(node->op) ? ELEMENTWISE : NOT_FUSIBLE;
    if (kind == NOT_FUSIBLE && limits->layout && node->input_count == 1 && clrun__fuse_is_layout(node->op))
        kind = LAYOUT;
    for (int k = 0; kind && k < node->input_count; k++)
        if (!dtype_runs(g->tensors[node->inputs[k]].type.dtype, limits->fp64))
            return NOT_FUSIBLE;
    return kind && dtype_runs(g->tensors[node->outputs[0]].type.dtype, limits->fp64) ? kind : NOT_FUSIBLE;
}

/* What the planner keeps per group while it grows (indexed by root). */
typedef struct growing {
    int32_t *externals; /* distinct input tensors from outside the group */
    int count;          /* entries of externals */
    int steps;          /* nodes */
    int kernels;        /* nodes that would run a kernel of their own (not reshape, a view) */
    bool layout_only;   /* every node moves elements: a chain the group's reads go through */
} growing;

static bool has(const int32_t *list, int count, int32_t t)
{
    for (int i = 0; i < count; i++)
        if (list[i] == t)
            return true;
    return false;
}

/* Externals of root's group if it took in p's group through tensor t, into out; -1 when there
 * are more than max. */
static int merged_externals(const growing *root, const growing *p, int32_t t, int32_t *out, int max)
{
    int count = 0;
    const growing *both[2] = {root, p};
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < both[s]->count; i++) {
            int32_t e = both[s]->externals[i];
            if (e == t || has(out, count, e))
                continue;
            if (count == max)
                return -1;
            out[count++] = e;
        }
    return count;
}

static void free_growing(growing *groups, int32_t n)
{
    for (int32_t i = 0; groups && i < n; i++)
        free(groups[i].externals);
    free(groups);
}

/* Visits each node in order and takes in the groups of the producers it may take. */
static bool grow(const clrun_graph *g, const clrun__fuse_limits *limits, int32_t *root_of,
                 growing *groups, const int32_t *reads)
{
    int max_inputs = limits->max_buffers - 1;
    int32_t *scratch = malloc(((size_t)max_inputs + 1) * sizeof *scratch);
    if (scratch == NULL)
        return false;
    for (int32_t n = 0; n < g->node_count; n++) {
        root_of[n] = -1;
        member_kind kind = kind_of(g, n, limits);
        if (kind == NOT_FUSIBLE)
            continue;
        const clrun__node *node = &g->nodes[n];
        growing *mine = &groups[n];
        mine->externals = malloc(((size_t)max_inputs + CLRUN__EW_MAX_INPUTS) * sizeof *mine->externals);
        if (mine->externals == NULL) {
            free(scratch);
            return false;
        }
        root_of[n] = n;
        mine->steps = 1;
        mine->layout_only = kind == LAYOUT;
        mine->kernels = strcmp(node->op->name, "reshape") != 0;
        for (int k = 0; k < node->input_count; k++)
            if (!has(mine->externals, mine->count, node->inputs[k]))
                mine->externals[mine->count++] = node->inputs[k];
        const clrun_tensor_type *space = &g->tensors[node->outputs[0]].type;
        for (int k = 0; k < node->input_count; k++) {
            int32_t t = node->inputs[k], p = g->tensors[t].producer;
            if (p < 0 || root_of[p] != p || g->tensors[t].is_output)
                continue;
            int slots = 0;
            for (int j = 0; j < node->input_count; j++)
                slots += node->inputs[j] == t;
            /* A layout node takes in only chains of layout nodes, and an elementwise one reads
             * what it takes in at its own element: layout nodes are the leaves of a group. */
            if (reads[t] != slots || (kind == LAYOUT && !groups[p].layout_only))
                continue;
            if (kind == ELEMENTWISE && !clrun__same_iteration_space(&g->tensors[t].type, space))
                continue;
            if (mine->steps + groups[p].steps > limits->max_steps)
                continue;
            int count = merged_externals(mine, &groups[p], t, scratch, max_inputs);
            if (count < 0)
                continue;
            memcpy(mine->externals, scratch, (size_t)count * sizeof *scratch);
            mine->count = count;
            mine->steps += groups[p].steps;
            mine->kernels += groups[p].kernels;
            mine->layout_only = mine->layout_only && groups[p].layout_only;
            root_of[p] = n; /* a union-find link: members of p's group reach n through p */
        }
    }
    free(scratch);
    return true;
}

/* The root of m's group, shortening the links on the way. */
static int32_t find_root(int32_t *root_of, int32_t m)
{
    int32_t r = m;
    while (root_of[r] != r)
        r = root_of[r];
    while (root_of[m] != r) {
        int32_t next = root_of[m];
        root_of[m] = r;
        m = next;
    }
    return r;
}

static clrun_status collect(const clrun_graph *g, int32_t *root_of, const growing *groups,
                            clrun__fuse_plan *out)
{
    int32_t nn = g->node_count, count = 0, total = 0;
    int32_t *index_of_root = malloc(((size_t)nn + 1) * sizeof *index_of_root);
    out->group_of = malloc(((size_t)nn + 1) * sizeof *out->group_of);
    if (!index_of_root || !out->group_of) {
        free(index_of_root);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    for (int32_t n = 0; n < nn; n++)
        if (root_of[n] >= 0)
            root_of[n] = find_root(root_of, n);
    for (int32_t n = 0; n < nn; n++) {
        index_of_root[n] = -1;
        if (root_of[n] == n && groups[n].kernels >= 2) { /* a group saves a kernel at least */
            index_of_root[n] = count++;
            total += groups[n].steps;
        }
    }
    out->group_count = count;
    out->members = malloc(((size_t)total + 1) * sizeof *out->members);
    out->member_start = calloc((size_t)count + 2, sizeof *out->member_start);
    if (!out->members || !out->member_start) {
        free(index_of_root);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    for (int32_t n = 0; n < nn; n++) {
        int32_t grp = root_of[n] >= 0 ? index_of_root[root_of[n]] : -1;
        out->group_of[n] = grp;
        if (grp >= 0)
            out->member_start[grp + 2]++;
    }
    for (int32_t k = 0; k < count; k++)
        out->member_start[k + 2] += out->member_start[k + 1];
    for (int32_t n = 0; n < nn; n++)
        if (out->group_of[n] >= 0)
            out->members[out->member_start[out->group_of[n] + 1]++] = n;
    free(index_of_root);
    return CLRUN_OK;
}

clrun_status clrun__fuse_plan_groups(const clrun_graph *g, const clrun__fuse_limits *limits,
                                     clrun__fuse_plan *out)
{
    memset(out, 0, sizeof *out);
    int32_t nn = g->node_count;
    int32_t *root_of = malloc(((size_t)nn + 1) * sizeof *root_of);
    int32_t *reads = malloc(((size_t)g->tensor_count + 1) * sizeof *reads);
    growing *groups = calloc((size_t)nn + 1, sizeof *groups);
    clrun_status s = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (root_of && reads && groups) {
        memset(reads, 0, ((size_t)g->tensor_count + 1) * sizeof *reads);
        for (int32_t n = 0; n < nn; n++)
            if (g->nodes[n].op)
                for (int k = 0; k < g->nodes[n].input_count; k++)
                    reads[g->nodes[n].inputs[k]]++;
        if (grow(g, limits, root_of, groups, reads))
            s = collect(g, root_of, groups, out);
    }
    free(root_of);
    free(reads);
    free_growing(groups, nn);
    if (s != CLRUN_OK)
        clrun__fuse_plan_free(out);
    return s;
}

void clrun__fuse_plan_free(clrun__fuse_plan *p)
{
    free(p->group_of);
    free(p->members);
    free(p->member_start);
    memset(p, 0, sizeof *p);
}
