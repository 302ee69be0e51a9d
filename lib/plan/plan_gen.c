/* clrun: memory-planning instance generators (see clrun/plan_gen.h).
 *
 * The packing families start from a full rectangle, time [0, T) by space [0, H), and cut it
 * into n pieces with guillotine cuts (each along time or space with even odds, at a uniform
 * position); each piece becomes a buffer whose lifetime is its time range and whose size its
 * height. Every moment is then covered exactly, so the lower bound is H and the plan that
 * rebuilds the rectangle reaches it: the optimum is known, and a planner's gap to it is its
 * true loss. Best-fit greedy orders miss it by about 30% (perfect) and 40% (balanced), as
 * measured on real instances by MiniMalloc's authors. */
#include <clrun/plan_gen.h>

#include "core/util.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

static uint64_t random_below(uint64_t *state, uint64_t bound)
{
    return clrun__splitmix64(state) % bound;
}

/* Uniform in [0, 1). */
static double random_unit(uint64_t *state)
{
    return (double)(clrun__splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
}

const char *clrun_plan_gen_family_name(clrun_plan_gen_family family)
{
    switch (family) {
    case CLRUN_PLAN_GEN_RANDOM:
        return "random";
    case CLRUN_PLAN_GEN_PERFECT:
        return "perfect";
    case CLRUN_PLAN_GEN_BALANCED:
        return "balanced";
    case CLRUN_PLAN_GEN_UNET:
        return "unet";
    case CLRUN_PLAN_GEN_CHAIN:
        return "chain";
    case CLRUN_PLAN_GEN_WIDE:
        return "wide";
    case CLRUN_PLAN_GEN_BUMPED:
        return "bumped";
    default:
        return "unknown";
    }
}

/* ---- random ---- */

/* Log-uniform over [64 B, 4 MiB]. */
static uint64_t random_size(uint64_t *rng)
{
    double log_size = log(64.0) + random_unit(rng) * (log(4194304.0) - log(64.0));
    return (uint64_t)exp(log_size);
}

static void gen_random(size_t n, uint64_t *rng, clrun_plan_buffer *out)
{
    const double mean_life = 24.0;
    for (size_t i = 0; i < n; i++) {
        uint64_t first = random_below(rng, n);
        /* geometric lifetime via the inverse of the exponential's distribution */
        uint64_t life = 1 + (uint64_t)(-log(1.0 - random_unit(rng)) * mean_life);
        uint64_t size = random_size(rng);
        out[i] = (clrun_plan_buffer){.size = size, .first = first, .last = first + life};
    }
}

/* ---- graph shapes ---- */

static void gen_chain(size_t n, uint64_t *rng, clrun_plan_buffer *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (clrun_plan_buffer){.size = random_size(rng), .first = i, .last = i + 2};
}

static void gen_wide(size_t n, uint64_t *rng, clrun_plan_buffer *out)
{
    uint64_t join = n > 1 ? n - 1 : 1; /* the join's step */
    for (size_t i = 0; i < n; i++) {
        uint64_t first = i, last = join + 1; /* the input (step 0) and the branches */
        if (i + 1 == n && n > 1) {
            first = join; /* the join's output */
            last = join + 1;
        }
        out[i] = (clrun_plan_buffer){.size = random_size(rng), .first = first, .last = last};
    }
}

/* ---- guillotine packings ---- */

/* A piece of the rectangle, in time steps and granules. */
typedef struct piece {
    uint64_t t0, t1; /* time range */
    uint64_t y0, y1; /* space range, in granules */
} piece;

static uint64_t area(const piece *p)
{
    return (p->t1 - p->t0) * (p->y1 - p->y0);
}

/* Cuts pieces[i] in two, the second half appended at pieces[*count]; false when the piece is
 * one step by one granule and cannot be cut. */
static bool cut_piece(piece *pieces, size_t i, size_t *count, uint64_t *rng)
{
    piece *p = &pieces[i];
    bool can_time = p->t1 - p->t0 >= 2, can_space = p->y1 - p->y0 >= 2;
    if (!can_time && !can_space)
        return false;
    bool along_time = can_time && (!can_space || random_unit(rng) < 0.5);
    piece second = *p;
    if (along_time) {
        uint64_t at = p->t0 + 1 + random_below(rng, p->t1 - p->t0 - 1);
        p->t1 = at;
        second.t0 = at;
    } else {
        uint64_t at = p->y0 + 1 + random_below(rng, p->y1 - p->y0 - 1);
        p->y1 = at;
        second.y0 = at;
    }
    pieces[(*count)++] = second;
    return true;
}

/* Cuts the rectangle into n pieces, out[] the buffers; *pieces_out (may be NULL) gets the
 * pieces (the caller frees them), which place the buffers at the optimum. */
static clrun_status gen_packing(clrun_plan_gen_family family, size_t n, uint64_t *rng,
                                clrun_plan_buffer *out, uint64_t *known_optimum,
                                piece **pieces_out)
{
    /* Room for n pieces of at least one step and one granule whichever way they are cut. */
    const uint64_t span = 4 * (uint64_t)n, height = 4 * (uint64_t)n;
    piece *pieces = malloc(n * sizeof *pieces);
    if (!pieces)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    size_t count = 1;
    pieces[0] = (piece){.t0 = 0, .t1 = span, .y0 = 0, .y1 = height};
    while (count < n) {
        /* Pick a random piece (a rare uncuttable pick is simply retried); the balanced family
         * cuts the larger of two random picks, which evens the sizes out. */
        size_t i = (size_t)random_below(rng, count);
        if (family == CLRUN_PLAN_GEN_BALANCED) {
            size_t j = (size_t)random_below(rng, count);
            if (area(&pieces[j]) > area(&pieces[i]))
                i = j;
        }
        cut_piece(pieces, i, &count, rng);
    }
    for (size_t i = 0; i < n; i++)
        out[i] = (clrun_plan_buffer){.size = (pieces[i].y1 - pieces[i].y0) * CLRUN_PLAN_GEN_GRANULE,
                                     .first = pieces[i].t0, .last = pieces[i].t1};
    *known_optimum = height * CLRUN_PLAN_GEN_GRANULE;
    if (pieces_out)
        *pieces_out = pieces;
    else
        free(pieces);
    return CLRUN_OK;
}

/* The balanced packing of the same seed, a quarter of its buffers one granule larger (the
 * bumps drawn from a stream of their own, after the cuts). */
static clrun_status gen_bumped(size_t n, uint64_t seed, clrun_plan_buffer *out,
                               uint64_t *known_optimum, piece **pieces_out)
{
    uint64_t rng = seed ^ ((uint64_t)CLRUN_PLAN_GEN_BALANCED << 56);
    clrun_status st =
        gen_packing(CLRUN_PLAN_GEN_BALANCED, n, &rng, out, known_optimum, pieces_out);
    if (st != CLRUN_OK)
        return st;
    uint64_t bumps = seed ^ ((uint64_t)CLRUN_PLAN_GEN_BUMPED << 56);
    for (size_t i = 0; i < n; i++)
        if (random_below(&bumps, 4) == 0)
            out[i].size += CLRUN_PLAN_GEN_GRANULE;
    *known_optimum = 0;
    return CLRUN_OK;
}

/* ---- U-Net ---- */

/* Appends a buffer if there is room; returns the new count. */
static size_t add(clrun_plan_buffer *out, size_t n, size_t count, uint64_t size, uint64_t first,
                  uint64_t last)
{
    if (count < n)
        out[count] = (clrun_plan_buffer){.size = size, .first = first, .last = last};
    return count + 1;
}

/* Rounds to the granule, at least one. */
static uint64_t granules(double bytes)
{
    uint64_t g = (uint64_t)(bytes / CLRUN_PLAN_GEN_GRANULE);
    return (g ? g : 1) * CLRUN_PLAN_GEN_GRANULE;
}

/* One U-Net starting at *t; returns the new count (may exceed n: extra buffers are dropped). */
static size_t gen_one_unet(clrun_plan_buffer *out, size_t n, size_t count, uint64_t *t,
                           uint64_t *rng)
{
    enum { MAX_LEVELS = 6 };
    size_t levels = 3 + (size_t)random_below(rng, 4);
    double top = exp(log(256.0 * 1024) + random_unit(rng) * (log(8.0 * 1024 * 1024) - log(256.0 * 1024)));
    uint64_t skip_size[MAX_LEVELS], skip_born[MAX_LEVELS];
    /* encoder: a temporary, the activation kept for the skip connection, the pooled output */
    for (size_t l = 0; l < levels; l++) {
        double s = top / pow(4.0, (double)l);
        count = add(out, n, count, granules(s * (1.0 + random_unit(rng))), *t, *t + 2);
        skip_size[l] = granules(s);
        skip_born[l] = *t + 1;
        count = add(out, n, count, granules(s / 4), *t + 2, *t + 4);
        *t += 3;
    }
    /* bottleneck */
    double bottom = top / pow(4.0, (double)levels);
    count = add(out, n, count, granules(bottom * 2), *t, *t + 2);
    *t += 1;
    /* decoder: upsample, concatenate with the skip (which dies here), convolve */
    for (size_t l = levels; l-- > 0;) {
        double s = top / pow(4.0, (double)l);
        count = add(out, n, count, granules(s), *t, *t + 2);
        count = add(out, n, count, skip_size[l], skip_born[l], *t + 2);
        count = add(out, n, count, granules(2 * s * (0.5 + random_unit(rng))), *t + 1, *t + 3);
        *t += 2;
    }
    *t += 2;
    return count;
}

static void gen_unet(size_t n, uint64_t *rng, clrun_plan_buffer *out)
{
    uint64_t t = 0;
    size_t count = 0;
    while (count < n)
        count = gen_one_unet(out, n, count, &t, rng);
}

clrun_status clrun_plan_gen(clrun_plan_gen_family family, size_t n, uint64_t seed,
                            clrun_plan_buffer *out, uint64_t *known_optimum)
{
    uint64_t optimum_unused;
    if (!known_optimum)
        known_optimum = &optimum_unused;
    *known_optimum = 0;
    if ((unsigned)family >= CLRUN_PLAN_GEN_COUNT || (n > 0 && !out))
        return CLRUN_ERROR_INVALID_ARGUMENT;
    if (n == 0)
        return CLRUN_OK;
    uint64_t rng = seed ^ ((uint64_t)family << 56);
    switch (family) {
    case CLRUN_PLAN_GEN_RANDOM:
        gen_random(n, &rng, out);
        return CLRUN_OK;
    case CLRUN_PLAN_GEN_UNET:
        gen_unet(n, &rng, out);
        return CLRUN_OK;
    case CLRUN_PLAN_GEN_CHAIN:
        gen_chain(n, &rng, out);
        return CLRUN_OK;
    case CLRUN_PLAN_GEN_WIDE:
        gen_wide(n, &rng, out);
        return CLRUN_OK;
    case CLRUN_PLAN_GEN_BUMPED:
        return gen_bumped(n, seed, out, known_optimum, NULL);
    default:
        return gen_packing(family, n, &rng, out, known_optimum, NULL);
    }
}

/* ---- known plans ---- */

static int compare_bottom(const void *a, const void *b)
{
    const piece *x = *(const piece *const *)a, *y = *(const piece *const *)b;
    if (x->y0 != y->y0)
        return x->y0 < y->y0 ? -1 : 1;
    return (x->t0 > y->t0) - (x->t0 < y->t0);
}

/* The bumped family's plan: the pieces from the bottom of the rectangle up, each raised onto
 * the highest top of the pieces below it (at each moment the pieces placed so far are exactly
 * those below it in the rectangle, so the highest top over its moments is where it fits). The
 * peak is the rectangle's height plus the most bumps on a path up through it. */
static clrun_status raise_pieces(const piece *pieces, const clrun_plan_buffer *buffers, size_t n,
                                 uint64_t *offsets)
{
    const piece **order = malloc(n * sizeof *order);
    uint64_t *top = calloc(4 * (uint64_t)n, sizeof *top); /* per moment of the span */
    if (!order || !top) {
        free(order);
        free(top);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = &pieces[i];
    qsort(order, n, sizeof *order, compare_bottom);
    for (size_t k = 0; k < n; k++) {
        const piece *p = order[k];
        size_t i = (size_t)(p - pieces);
        uint64_t at = 0;
        for (uint64_t t = p->t0; t < p->t1; t++)
            if (top[t] > at)
                at = top[t];
        offsets[i] = at;
        for (uint64_t t = p->t0; t < p->t1; t++)
            top[t] = at + buffers[i].size;
    }
    free(order);
    free(top);
    return CLRUN_OK;
}

clrun_status clrun_plan_gen_plan(clrun_plan_gen_family family, size_t n, uint64_t seed,
                                 uint64_t *offsets, uint64_t *peak)
{
    if ((unsigned)family >= CLRUN_PLAN_GEN_COUNT || (n > 0 && !offsets) || !peak)
        return CLRUN_ERROR_INVALID_ARGUMENT;
    if (family != CLRUN_PLAN_GEN_PERFECT && family != CLRUN_PLAN_GEN_BALANCED &&
        family != CLRUN_PLAN_GEN_BUMPED && family != CLRUN_PLAN_GEN_WIDE)
        return CLRUN_ERROR_UNSUPPORTED;
    *peak = 0;
    if (n == 0)
        return CLRUN_OK;
    clrun_plan_buffer *b = malloc(n * sizeof *b);
    if (!b)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    uint64_t known = 0, rng = seed ^ ((uint64_t)family << 56);
    piece *pieces = NULL;
    clrun_status st = CLRUN_OK;
    if (family == CLRUN_PLAN_GEN_WIDE) {
        gen_wide(n, &rng, b); /* all alive at the join: stacked, the total is the optimum */
        for (size_t i = 0; i < n; i++) {
            offsets[i] = *peak;
            *peak += b[i].size;
        }
    } else if (family == CLRUN_PLAN_GEN_BUMPED) {
        st = gen_bumped(n, seed, b, &known, &pieces);
        if (st == CLRUN_OK)
            st = raise_pieces(pieces, b, n, offsets);
    } else {
        st = gen_packing(family, n, &rng, b, &known, &pieces);
        if (st == CLRUN_OK)
            for (size_t i = 0; i < n; i++)
                offsets[i] = pieces[i].y0 * CLRUN_PLAN_GEN_GRANULE;
    }
    if (st == CLRUN_OK && family != CLRUN_PLAN_GEN_WIDE)
        for (size_t i = 0; i < n; i++)
            if (offsets[i] + b[i].size > *peak)
                *peak = offsets[i] + b[i].size;
    free(pieces);
    free(b);
    return st;
}
