/* Tests of --deterministic's fixed-order sum (tools/det_sum.c): whatever the number of ranks
 * (or devices) the chunks are shared between, each streaming its own and rank 0 merging every
 * rank's blocks as tools/dist_mpi.c and tools/train_devices.c do, the sum is the tree's, bit for bit; the blocks a rank holds are
 * those clrun_cli_tree_blocks predicts. Pure: no device, no MPI. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../tools/det_sum.h"

enum { P = 5, MAX_CHUNKS = 70, MAX_RANKS = 8 };

/* Chunk c's values: magnitudes from 1e-4 to 1e4, so that another order rounds otherwise. */
static float value(int64_t c, int i)
{
    uint32_t x = (uint32_t)(c * 2654435761u) ^ (uint32_t)(i * 40503u);
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    float mantissa = (float)(x & 0xffff) / 65536.0f + 0.5f;
    static const float scale[5] = {1e-4f, 1e-2f, 1.0f, 1e2f, 1e4f};
    return (x & 0x10000 ? -mantissa : mantissa) * scale[(x >> 17) % 5];
}

/* The tree's definition: node (lo, level) over the chunks [0, chunks). */
static void node(int64_t lo, int level, int64_t chunks, float *out)
{
    if (level == 0) {
        for (int i = 0; i < P; i++)
            out[i] = value(lo, i);
        return;
    }
    int64_t half = (int64_t)1 << (level - 1);
    node(lo, level - 1, chunks, out);
    if (lo + half >= chunks)
        return; /* the right half is past the end */
    float right[P];
    node(lo + half, level - 1, chunks, right);
    for (int i = 0; i < P; i++)
        out[i] = out[i] + right[i];
}

static void reference(int64_t chunks, float *out)
{
    int level = 0;
    while (((int64_t)1 << level) < chunks)
        level++;
    node(0, level, chunks, out);
}

/* Rank r's blocks of its share, streamed chunk by chunk. */
static void stream(clrun_cli_tree *t, int64_t first, int64_t end)
{
    assert_true(clrun_cli_tree_init(t, P));
    for (int64_t c = first; c < end; c++) {
        float *v = clrun_cli_tree_next(t);
        assert_non_null(v);
        for (int i = 0; i < P; i++)
            v[i] = value(c, i);
        assert_true(clrun_cli_tree_push(t, c, 0));
    }
    assert_int_equal(t->depth, clrun_cli_tree_blocks(first, end, NULL, NULL, 0));
}

static void any_rank_count_gives_the_tree_sum_bit_for_bit(void **state)
{
    (void)state;
    int order_mattered = 0;
    for (int64_t chunks = 1; chunks <= MAX_CHUNKS; chunks++) {
        float want[P];
        reference(chunks, want);
        float left[P] = {0};
        for (int64_t c = 0; c < chunks; c++)
            for (int i = 0; i < P; i++)
                left[i] += value(c, i);
        order_mattered += memcmp(left, want, sizeof want) != 0;
        for (int n = 1; n <= MAX_RANKS && n <= chunks; n++) {
            clrun_cli_tree ranks[MAX_RANKS];
            for (int r = 0; r < n; r++) {
                int64_t first, end;
                clrun_cli_share(chunks, n, r, &first, &end);
                assert_true(end > first);
                stream(&ranks[r], first, end);
                /* the predicted blocks are the ones held, in order */
                int64_t lo[64];
                int level[64];
                int k = clrun_cli_tree_blocks(first, end, lo, level, 64);
                for (int b = 0; b < k; b++) {
                    assert_int_equal(ranks[r].lo[b], lo[b]);
                    assert_int_equal(ranks[r].level[b], level[b]);
                }
            }
            /* rank 0 merges the others' blocks after its own, then folds: block by block as
             * tools/dist_mpi.c does from the gathered values (odd n), or tree by tree as
             * tools/train_devices.c does from the devices' trees (even n) */
            for (int r = 1; r < n; r++)
                if (n % 2 == 0)
                    assert_true(clrun_cli_tree_merge(&ranks[0], &ranks[r]));
                else
                    for (int b = 0; b < ranks[r].depth; b++)
                        assert_true(clrun_cli_tree_push_copy(&ranks[0], ranks[r].sum[b],
                                                             ranks[r].lo[b], ranks[r].level[b]));
            const float *got = clrun_cli_tree_fold(&ranks[0]);
            assert_non_null(got);
            if (memcmp(got, want, sizeof want) != 0) {
                fprintf(stderr, "%lld chunks on %d ranks: another sum than the tree's\n",
                        (long long)chunks, n);
                fail();
            }
            for (int r = 0; r < n; r++)
                clrun_cli_tree_free(&ranks[r]);
        }
    }
    /* the values are such that a left-to-right sum is another one, mostly */
    assert_true(order_mattered > MAX_CHUNKS / 2);
}

/* A tree reused across steps: reset, streamed again, the same sum; nothing pushed folds to
 * NULL. */
static void a_reset_tree_sums_again(void **state)
{
    (void)state;
    clrun_cli_tree t;
    stream(&t, 0, 13);
    float first[P];
    memcpy(first, clrun_cli_tree_fold(&t), sizeof first);
    assert_null(clrun_cli_tree_fold(&t));
    clrun_cli_tree_reset(&t);
    for (int64_t c = 0; c < 13; c++) {
        float *v = clrun_cli_tree_next(&t);
        for (int i = 0; i < P; i++)
            v[i] = value(c, i);
        assert_true(clrun_cli_tree_push(&t, c, 0));
    }
    assert_memory_equal(clrun_cli_tree_fold(&t), first, sizeof first);
    clrun_cli_tree_free(&t);
}

/* The shares: contiguous, covering, the larger first. */
static void the_shares_cover_the_chunks_in_order(void **state)
{
    (void)state;
    int64_t first, end, at = 0;
    int64_t sizes[3];
    for (int r = 0; r < 3; r++) {
        clrun_cli_share(32, 3, r, &first, &end);
        assert_int_equal(first, at);
        sizes[r] = end - first;
        at = end;
    }
    assert_int_equal(at, 32);
    assert_int_equal(sizes[0], 11);
    assert_int_equal(sizes[1], 11);
    assert_int_equal(sizes[2], 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(any_rank_count_gives_the_tree_sum_bit_for_bit),
        cmocka_unit_test(a_reset_tree_sums_again),
        cmocka_unit_test(the_shares_cover_the_chunks_in_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
