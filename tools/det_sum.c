/* The fixed-order sum of clrun train --deterministic (det_sum.h says the tree). */
#include <stdlib.h>
#include <string.h>

#include "det_sum.h"

bool clrun_cli_tree_init(clrun_cli_tree *t, uint64_t count)
{
    memset(t, 0, sizeof *t);
    t->count = count ? count : 1;
    return true;
}

static bool grow(clrun_cli_tree *t)
{
    int room = t->room ? t->room * 2 : 16;
    int64_t *lo = realloc(t->lo, sizeof *lo * (size_t)room);
    if (lo == NULL)
        return false;
    t->lo = lo;
    int *level = realloc(t->level, sizeof *level * (size_t)room);
    if (level == NULL)
        return false;
    t->level = level;
    float **sum = realloc(t->sum, sizeof *sum * (size_t)room);
    if (sum == NULL)
        return false;
    for (int i = t->room; i < room; i++)
        sum[i] = NULL;
    t->sum = sum;
    t->room = room;
    return true;
}

float *clrun_cli_tree_next(clrun_cli_tree *t)
{
    if (t->spare == NULL)
        t->spare = malloc(sizeof *t->spare * (size_t)t->count);
    return t->spare;
}

bool clrun_cli_tree_push(clrun_cli_tree *t, int64_t lo, int level)
{
    if (t->spare == NULL || (t->depth == t->room && !grow(t)))
        return false;
    /* the entry's old buffer (kept from an earlier step) becomes the spare */
    float *old = t->sum[t->depth];
    t->sum[t->depth] = t->spare;
    t->spare = old;
    t->lo[t->depth] = lo;
    t->level[t->depth] = level;
    t->depth++;
    /* merge siblings: two blocks of one level, the left one aligned to their parent */
    while (t->depth >= 2) {
        int a = t->depth - 2, b = t->depth - 1;
        if (t->level[a] != t->level[b] || t->lo[a] % ((int64_t)2 << t->level[a]) != 0)
            break;
        float *left = t->sum[a];
        const float *right = t->sum[b];
        for (uint64_t i = 0; i < t->count; i++)
            left[i] = left[i] + right[i];
        t->level[a]++;
        t->depth--;
    }
    return true;
}

bool clrun_cli_tree_push_copy(clrun_cli_tree *t, const float *values, int64_t lo, int level)
{
    float *next = clrun_cli_tree_next(t);
    if (next == NULL)
        return false;
    memcpy(next, values, sizeof *next * (size_t)t->count);
    return clrun_cli_tree_push(t, lo, level);
}

bool clrun_cli_tree_merge(clrun_cli_tree *t, const clrun_cli_tree *from)
{
    if (from->depth > 0 && from->count != t->count)
        return false;
    for (int k = 0; k < from->depth; k++)
        if (!clrun_cli_tree_push_copy(t, from->sum[k], from->lo[k], from->level[k]))
            return false;
    return true;
}

const float *clrun_cli_tree_fold(clrun_cli_tree *t)
{
    if (t->depth == 0)
        return NULL;
    /* a block past the end is its left part: the last blocks nest to the right */
    for (int a = t->depth - 2; a >= 0; a--) {
        float *left = t->sum[a];
        const float *right = t->sum[a + 1];
        for (uint64_t i = 0; i < t->count; i++)
            left[i] = left[i] + right[i];
    }
    t->depth = 0;
    return t->sum[0];
}

void clrun_cli_tree_reset(clrun_cli_tree *t)
{
    t->depth = 0;
}

void clrun_cli_tree_free(clrun_cli_tree *t)
{
    for (int i = 0; i < t->room; i++)
        free(t->sum[i]);
    free(t->sum);
    free(t->lo);
    free(t->level);
    free(t->spare);
    memset(t, 0, sizeof *t);
}

void clrun_cli_tree_mean(const float *sum, uint64_t count, int64_t chunks, float *out)
{
    float c = (float)chunks;
    for (uint64_t i = 0; i < count; i++)
        out[i] = sum[i] / c;
}

int clrun_cli_tree_blocks(int64_t first, int64_t end, int64_t *lo, int *level, int max)
{
    int n = 0;
    for (int64_t at = first; at < end; n++) {
        int k = 0;
        while (k < 62 && at % ((int64_t)2 << k) == 0 && at + ((int64_t)2 << k) <= end)
            k++;
        if (n < max && lo)
            lo[n] = at;
        if (n < max && level)
            level[n] = k;
        at += (int64_t)1 << k;
    }
    return n;
}

clrun_status clrun_cli_share(int64_t total, int size, int rank, int64_t *first, int64_t *end)
{
    int64_t rows;
    clrun_status st = clrun_train_parallel_share(total, size, rank, first, &rows);
    if (st == CLRUN_OK)
        *end = *first + rows;
    return st;
}
