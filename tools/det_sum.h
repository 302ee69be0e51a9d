/* clrun train --deterministic: the sum of the chunk gradients of a global batch in one fixed
 * order, whatever the number of ranks that computed them.
 *
 * The order is a binary tree over the chunks 0..C-1: an aligned block of 2^k chunks [lo, lo +
 * 2^k) (lo a multiple of 2^k) sums to its left half plus its right half, elementwise in float;
 * a block that reaches past C is its left half (or, when that too is past, the part before C,
 * recursively). Each rank streams its own contiguous chunks through a stack that merges two
 * sibling blocks as soon as both are there (pairwise summation: at most about 2 log2 C sums held
 * at once), which leaves the canonical decomposition of its range into maximal aligned blocks.
 * Rank 0 continues the same merging with every rank's blocks in chunk order and folds what is
 * left from the right: the root of the tree. clrun train --devices --deterministic does the same
 * in one process, a tree per device and device 0's the root. Every block is the same sum of the
 * same floats on every rank count, so the result is bit for bit that of one process. */
#ifndef CLRUN_TOOLS_DET_SUM_H
#define CLRUN_TOOLS_DET_SUM_H

#include <stdbool.h>
#include <stdint.h>

#include <clrun/train_parallel.h>

typedef struct clrun_cli_tree {
    uint64_t count;      /* floats per sum */
    int depth;           /* blocks on the stack */
    int room;            /* entries allocated */
    int64_t *lo;         /* per entry: its first chunk */
    int *level;          /* per entry: log2 of its chunks */
    float **sum;         /* per entry: its sum (count floats), owned */
    float *spare;        /* a free sum for the next leaf (count floats), owned */
} clrun_cli_tree;

/* An empty tree of sums of count floats; false when out of host memory (nothing held). */
bool clrun_cli_tree_init(clrun_cli_tree *t, uint64_t count);

/* The buffer to write the next chunk's (or block's) values into before clrun_cli_tree_push;
 * NULL when out of host memory. */
float *clrun_cli_tree_next(clrun_cli_tree *t);

/* The block [lo, lo + 2^level) whose values are in the buffer clrun_cli_tree_next gave, pushed
 * and merged with the blocks before it where they are siblings; false when out of host
 * memory. Blocks are pushed in chunk order without gaps. */
bool clrun_cli_tree_push(clrun_cli_tree *t, int64_t lo, int level);

/* The block [lo, lo + 2^level) whose sum is `values` (count floats, copied), pushed as
 * clrun_cli_tree_push pushes one: how the root continues with the blocks another rank or device
 * computed. false when out of host memory. */
bool clrun_cli_tree_push_copy(clrun_cli_tree *t, const float *values, int64_t lo, int level);

/* Every block on from's stack (another rank's or device's chunks, which come right after those
 * pushed on t), pushed on t in order by clrun_cli_tree_push_copy; from is unchanged. false when
 * out of host memory, or when the sums differ in length. */
bool clrun_cli_tree_merge(clrun_cli_tree *t, const clrun_cli_tree *from);

/* The stack folded from the right into its first entry: the sum of everything pushed, in the
 * tree's order when the blocks cover chunks [0, C). The tree is empty afterwards; the result
 * lives in t's buffers until the next push. NULL when nothing was pushed. */
const float *clrun_cli_tree_fold(clrun_cli_tree *t);

/* Empties the stack (keeps the buffers for the next step). */
void clrun_cli_tree_reset(clrun_cli_tree *t);

void clrun_cli_tree_free(clrun_cli_tree *t);

/* The mean gradient of a step from the root's sum of its C chunks' gradients: out[i] = sum[i] /
 * C in float, the one division every path (one process, ranks, devices) makes, so they agree
 * bit for bit. */
void clrun_cli_tree_mean(const float *sum, uint64_t count, int64_t chunks, float *out);

/* The canonical decomposition of the chunks [first, end) into maximal aligned blocks, in
 * order: their count, and the first `max` of them in lo and level (either may be NULL). */
int clrun_cli_tree_blocks(int64_t first, int64_t end, int64_t *lo, int *level, int max);

/* Rank r's share of `total` items over `size` ranks: [first, end), total / size items each
 * (rounded down) and one more on the first total mod size ranks (clrun_train_parallel_share's
 * split). Its errors: total < size, size < 1 or rank outside [0, size). */
clrun_status clrun_cli_share(int64_t total, int size, int rank, int64_t *first, int64_t *end);

#endif
