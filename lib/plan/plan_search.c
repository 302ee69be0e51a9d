/* clrun: iterated local search over greedy placement orders.
 *
 * A plan is encoded as an order; the best-fit decoder (plan_greedy.c) turns it into offsets.
 * The peak is defined by a few "critical" buffers whose end is the peak. Each move changes the
 * order so that one of them may land lower:
 *   - promote: move a critical buffer to an earlier position (it then picks its gap before the
 *     buffers that pushed it up),
 *   - demote: move a buffer that is placed before a critical one and overlaps it in time to just
 *     after it (so the critical buffer may take its place),
 *   - swap: exchange two nearby positions (diversification on plateaus).
 * Only the suffix of the order from the first changed position is decoded again: the placements
 * before it are unchanged. Decoding stops as soon as the partial peak exceeds the current one,
 * and a rejected move is undone by re-inserting the saved offsets, so a bad move costs little.
 * A move is kept when the peak does not grow: walking plateaus is what lets the search escape
 * the greedy order's local optimum. The best plan seen is kept (anytime). */
#include "plan/plan_internal.h"

#include <stdlib.h>
#include <string.h>

/* Local search state: the current order and plan, fully inserted in the decoder. */
typedef struct local {
    clrun__plan_decoder *d;  /* holds the current plan's placements */
    const clrun_plan_buffer *buffers;
    size_t n;
    uint32_t *order;         /* current order */
    uint32_t *position;      /* buffer -> its position in order */
    uint64_t *offset;        /* current plan, by buffer */
    uint64_t *prefix_peak;   /* prefix_peak[i]: peak of order[0..i) */
    uint64_t *trial_peak;    /* the same for the move being tried */
    uint32_t *saved;         /* order[lo..hi] before the move, to undo it */
    uint64_t peak;           /* current plan's peak */
    uint64_t rng;            /* random state */
    double deadline;         /* monotonic seconds */
} local;

static uint64_t end_of(const local *s, uint32_t b)
{
    return s->offset[b] + s->buffers[b].size;
}

/* A critical buffer (end == peak), uniformly among them. */
static uint32_t pick_critical(local *s)
{
    uint32_t chosen = 0;
    uint64_t seen = 0;
    for (uint32_t b = 0; b < s->n; b++) {
        if (end_of(s, b) != s->peak)
            continue;
        if (clrun__plan_random_below(&s->rng, ++seen) == 0)
            chosen = b;
    }
    return chosen;
}

/* A buffer placed before c that overlaps it in time and lies below it, or c itself when none
 * (picked uniformly among a bounded sample of the positions before c). */
static uint32_t pick_blocker(local *s, uint32_t c)
{
    const clrun_plan_buffer *cb = &s->buffers[c];
    uint32_t chosen = c;
    uint64_t seen = 0;
    uint32_t pos = s->position[c];
    for (uint32_t i = 0; i < pos; i++) {
        uint32_t b = s->order[i];
        const clrun_plan_buffer *bb = &s->buffers[b];
        if (bb->first >= cb->last || cb->first >= bb->last || s->offset[b] >= s->offset[c])
            continue;
        if (clrun__plan_random_below(&s->rng, ++seen) == 0)
            chosen = b;
    }
    return chosen;
}

/* Moves the element at position `from` to position `to`, shifting the ones between. */
static void move_element(uint32_t *order, uint32_t from, uint32_t to)
{
    uint32_t x = order[from];
    if (from > to)
        memmove(order + to + 1, order + to, (size_t)(from - to) * sizeof *order);
    else
        memmove(order + from, order + from + 1, (size_t)(to - from) * sizeof *order);
    order[to] = x;
}

/* Chooses a move and applies it to s->order; [*lo, *hi] is the range of positions changed
 * (saved beforehand so the move can be undone). */
static void apply_random_move(local *s, uint32_t *lo, uint32_t *hi)
{
    uint32_t n = (uint32_t)s->n;
    uint32_t from, to;
    uint64_t kind = clrun__plan_random_below(&s->rng, 8);
    uint32_t c = pick_critical(s);
    if (kind < 4 && s->position[c] > 0) {
        /* promote: half the time a short hop, half the time anywhere earlier */
        from = s->position[c];
        uint32_t reach = kind < 2 ? (from < 8 ? from : 8) : from;
        to = from - 1 - (uint32_t)clrun__plan_random_below(&s->rng, reach);
    } else if (kind < 7 && (from = s->position[pick_blocker(s, c)]) < s->position[c]) {
        to = s->position[c]; /* demote the blocker to just after c */
    } else {
        from = (uint32_t)clrun__plan_random_below(&s->rng, n);
        uint32_t step = 1 + (uint32_t)clrun__plan_random_below(&s->rng, 8);
        to = from + step < n ? from + step : (from >= step ? from - step : n - 1);
    }
    *lo = from < to ? from : to;
    *hi = from < to ? to : from;
    memcpy(s->saved, s->order + *lo, (size_t)(*hi - *lo + 1) * sizeof *s->order);
    move_element(s->order, from, to);
}

/* Decodes order[lo..n) with the new order; false (stopped at position *stop) once the partial
 * peak exceeds the current one. New offsets go to d->offset. */
static bool decode_suffix(local *s, uint32_t lo, uint32_t *stop)
{
    uint64_t peak = s->prefix_peak[lo];
    for (uint32_t i = lo; i < s->n; i++) {
        if (clrun__plan_decoder_late(s->d, s->deadline)) {
            *stop = i; /* out of time: the move is dropped */
            return false;
        }
        uint32_t b = s->order[i];
        uint64_t at = clrun__plan_decoder_fit(s->d, b);
        clrun__plan_decoder_insert(s->d, b, at);
        uint64_t end = at + s->buffers[b].size;
        if (end > peak)
            peak = end;
        s->trial_peak[i + 1] = peak;
        if (peak > s->peak) {
            *stop = i + 1;
            return false;
        }
    }
    *stop = (uint32_t)s->n;
    return true;
}

/* One move: true when it was kept. */
static bool try_move(local *s)
{
    uint32_t lo, hi, stop;
    apply_random_move(s, &lo, &hi);
    /* The move permutes positions lo..hi only, so order[lo..n) still names the same buffers
     * as before: take them all out and place them again in the new order. */
    for (uint32_t i = lo; i < s->n; i++)
        clrun__plan_decoder_remove(s->d, s->order[i]);
    bool kept = decode_suffix(s, lo, &stop);
    if (kept) {
        for (uint32_t i = lo; i < s->n; i++) {
            uint32_t b = s->order[i];
            s->offset[b] = s->d->offset[b];
            s->prefix_peak[i + 1] = s->trial_peak[i + 1];
        }
        for (uint32_t i = lo; i <= hi; i++)
            s->position[s->order[i]] = i;
        s->peak = s->prefix_peak[s->n];
        return true;
    }
    /* Undo: take out what the trial placed, restore the order, put back the saved plan. */
    for (uint32_t i = lo; i < stop; i++)
        clrun__plan_decoder_remove(s->d, s->order[i]);
    memcpy(s->order + lo, s->saved, (size_t)(hi - lo + 1) * sizeof *s->order);
    for (uint32_t i = lo; i < s->n; i++)
        clrun__plan_decoder_insert(s->d, s->order[i], s->offset[s->order[i]]);
    return false;
}

static void local_free(local *s)
{
    free(s->order);
    free(s->position);
    free(s->offset);
    free(s->prefix_peak);
    free(s->trial_peak);
    free(s->saved);
}

/* Places the starting order in the decoder and fills the tables; false when the deadline came
 * first. */
static bool local_start(local *s, const uint32_t *order)
{
    memcpy(s->order, order, s->n * sizeof *order);
    clrun__plan_decoder_clear(s->d);
    s->prefix_peak[0] = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        if (clrun__plan_decoder_late(s->d, s->deadline))
            return false;
        uint32_t b = s->order[i];
        s->position[b] = i;
        uint64_t at = clrun__plan_decoder_fit(s->d, b);
        clrun__plan_decoder_insert(s->d, b, at);
        s->offset[b] = at;
        uint64_t end = at + s->buffers[b].size;
        s->prefix_peak[i + 1] = end > s->prefix_peak[i] ? end : s->prefix_peak[i];
    }
    s->peak = s->prefix_peak[s->n];
    return true;
}

clrun_status clrun__plan_local_search(clrun__plan_decoder *d, const uint32_t *order,
                                      uint64_t lower_bound, double deadline, uint64_t max_moves,
                                      uint64_t seed, uint64_t *best_peak, uint64_t *offsets,
                                      uint64_t *moves)
{
    size_t n = d->n;
    *moves = 0;
    if (n < 2)
        return CLRUN_OK;
    local s = {.d = d, .buffers = d->buffers, .n = n, .rng = seed, .deadline = deadline};
    s.order = malloc(n * sizeof *s.order);
    s.position = malloc(n * sizeof *s.position);
    s.offset = malloc(n * sizeof *s.offset);
    s.prefix_peak = malloc((n + 1) * sizeof *s.prefix_peak);
    s.trial_peak = malloc((n + 1) * sizeof *s.trial_peak);
    s.saved = malloc(n * sizeof *s.saved);
    if (!s.order || !s.position || !s.offset || !s.prefix_peak || !s.trial_peak || !s.saved) {
        local_free(&s);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    bool started = local_start(&s, order);
    while (started && s.peak > lower_bound && *moves < max_moves && clrun__plan_now() < deadline) {
        (*moves)++;
        if (try_move(&s) && s.peak < *best_peak) {
            *best_peak = s.peak;
            memcpy(offsets, s.offset, n * sizeof *offsets);
        }
    }
    clrun__plan_decoder_clear(d);
    local_free(&s);
    return CLRUN_OK;
}
