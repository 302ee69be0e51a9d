/* clrun: generators of memory-planning instances (`clrun plan --gen`), for benchmarks and tests
 * of planners, clrun's or others'.
 * Deterministic: the same family, size and seed give the same buffers (the random and unet
 * families use libm's exp/log, so another libm may round a size differently). */
#ifndef CLRUN_PLAN_GEN_H
#define CLRUN_PLAN_GEN_H

#include <stddef.h>
#include <stdint.h>

#include <clrun/plan.h>
#include <clrun/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Sizes of the packing families are multiples of this, so any alignment up to it keeps their
 * known optimum. */
#define CLRUN_PLAN_GEN_GRANULE 256

typedef enum clrun_plan_gen_family {
    /* Starts uniform over n moments, lifetimes 1 + geometric (mean 24), sizes log-uniform over
     * [64 B, 4 MiB] and not rounded: the easy, unstructured case. */
    CLRUN_PLAN_GEN_RANDOM = 0,
    /* A perfect packing: a full time x space rectangle cut at random (guillotine cuts) into n
     * buffers. Every moment is full, so the optimum equals the lower bound, which is known. */
    CLRUN_PLAN_GEN_PERFECT,
    /* A perfect packing whose pieces are kept similar in size (each cut splits the larger of
     * two random pieces): many mid-sized buffers interlock, and best fit leaves holes that no
     * later buffer fills; greedy orders miss the optimum by about 40%. The optimum equals the
     * lower bound. */
    CLRUN_PLAN_GEN_BALANCED,
    /* U-Net-like graphs: encoder activations shrink by 4x per level and stay alive until the
     * mirrored decoder level uses them (skip connections), with short-lived temporaries
     * between; several such networks one after another until n buffers. Optimum unknown. */
    CLRUN_PLAN_GEN_UNET,
    /* A chain of operations as the executor schedules it: step i writes buffer i, which step
     * i + 1 reads, so buffer i is alive over [i, i + 2); sizes as in random. Two alive at once. */
    CLRUN_PLAN_GEN_CHAIN,
    /* A wide graph: step 0 writes an input that n - 2 branches (steps 1 .. n - 2) read, each
     * writing one buffer that a final join reads; the join's output follows. Every branch
     * output stays alive until the join, so all n are alive at once at its step: the optimum is
     * the total (sizes as in random). The adversarial case for best fit, O(n^2). */
    CLRUN_PLAN_GEN_WIDE,
    /* A balanced packing (same seed, same cuts) whose buffers each grow by one granule with
     * odds 1/4: the rectangle no longer rebuilds exactly, so the optimum is usually above the
     * lower bound, and unknown (*known_optimum 0), though within 1 % of it at 150-500 buffers
     * (clrun_plan_gen_plan). The hard case for a complete search: it must prove that nothing
     * fits lower, not only find a plan at the bound. */
    CLRUN_PLAN_GEN_BUMPED,
    CLRUN_PLAN_GEN_COUNT /* number of families; not a family */
} clrun_plan_gen_family;

/* Fills out[0..n) with an instance of `family`. *known_optimum (may be NULL) gets the optimal
 * peak when the family guarantees one, else 0. CLRUN_ERROR_INVALID_ARGUMENT for an unknown
 * family or NULL out with n > 0; CLRUN_ERROR_OUT_OF_HOST_MEMORY. */
clrun_status clrun_plan_gen(clrun_plan_gen_family family, size_t n, uint64_t seed,
                            clrun_plan_buffer *out, uint64_t *known_optimum);

/* A plan the generator knows for the instance clrun_plan_gen makes with the same family, n and
 * seed: offsets[0..n) and its peak in *peak, every offset a multiple of CLRUN_PLAN_GEN_GRANULE
 * (except wide's). For perfect and balanced the rectangle rebuilt, for wide the buffers
 * stacked: the optimum. For bumped the rectangle with each piece raised onto the pieces below
 * it: not proven optimal, an upper bound on the optimum that planners can be measured against
 * (1.002-1.007x the lower bound at 150-500 buffers, seeds 1-3). Costs O(n log n) plus, for
 * bumped, the sum of the lifetimes. CLRUN_ERROR_UNSUPPORTED for the families with no known plan
 * (random, unet, chain); CLRUN_ERROR_INVALID_ARGUMENT for an unknown family or a NULL pointer;
 * CLRUN_ERROR_OUT_OF_HOST_MEMORY. */
clrun_status clrun_plan_gen_plan(clrun_plan_gen_family family, size_t n, uint64_t seed,
                                 uint64_t *offsets, uint64_t *peak);

/* "random", "perfect", "balanced", "unet", "chain", "wide", "bumped"; "unknown" out of
 * range. */
const char *clrun_plan_gen_family_name(clrun_plan_gen_family family);

#ifdef __cplusplus
}
#endif
#endif
