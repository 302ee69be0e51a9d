/* clrun: the decision search's tables, built once per part and reused by every decision and
 * restart on it (plan_decide.c): sizes on a compressed time axis, the buffers alive with each
 * buffer (both ways), the buffers alive at each moment with their aligned total and largest
 * padding, and the static tie-break orders, each sorted on first use. Building is O(m log m + E
 * + S) for E overlapping pairs and S buffer-moments; parts beyond a few million of either are
 * not searched (too dense to pay off, and 32 MB each), and the clock is read while building so
 * that a late start costs nothing. */
#include "plan/plan_decide.h"

#include <stdlib.h>
#include <string.h>

/* Beyond these many overlap pairs or buffer-moments a part is not searched (32 MB each). */
#define DECIDE_MAX_OVERLAPS (UINT64_C(1) << 22)
#define DECIDE_MAX_SECTION_ENTRIES (UINT64_C(1) << 23)
/* Steps of the table building between clock reads. */
#define DECIDE_BUILD_CLOCK_EVERY 65536
/* Floors per moment are kept only while a placement's share of that work (the moments of the
 * buffers it raises) stays under this on average: beyond, the floor is L alone. Both are lower
 * bounds: the search stays complete, only its pruning is weaker. */
#define DECIDE_FLOOR_WORK 4096
/* ... or whatever that share, while the whole part's work (about a dive's cost with floors)
 * stays under this: a few milliseconds a dive. The fail-first choice needs the floors: the
 * balanced packings of 500 buffers (5k a placement, 2.7M in all) are solved with them, not
 * without; at 1000 buffers (10M) the dives are too slow for them to pay within seconds. */
#define DECIDE_FLOOR_TOTAL (UINT64_C(1) << 22)
/* A restart's perturbed order moves each buffer by less than the part over this. */
#define SHUFFLE_SPREAD 8

bool clrun__plan_decide_tree_alloc(min_tree *t, size_t count)
{
    t->leaves = 1;
    while (t->leaves < count)
        t->leaves *= 2;
    t->node = malloc(2 * t->leaves * sizeof *t->node);
    return t->node != NULL;
}


void clrun__plan_decide_free(clrun__plan_decide *d)
{
    if (!d)
        return;
    free(d->size);
    free(d->aligned);
    free(d->from);
    free(d->to);
    free(d->pad);
    free(d->sum0);
    free(d->count0);
    free(d->ov_start);
    free(d->ov);
    free(d->sec_start);
    free(d->sec);
    for (int r = 0; r < CLRUN__PLAN_RANKINGS; r++) {
        free(d->rank[r]);
        free(d->by_rank[r]);
    }
    free(d->shuffled_rank);
    free(d->shuffled_by_rank);
    free(d->placed);
    free(d->offset);
    free(d->end);
    free(d->sum);
    free(d->count);
    free(d->floor_at);
    free(d->holders);
    free(d->low);
    free(d->key.node);
    free(d->dead.node);
    free(d->stack.node);
    free(d->trail);
    free(d->frames);
    free(d->touched);
    free(d->cuts0);
    free(d->cuts);
    free(d->starts);
    free(d->start_sums);
    free(d->fresh);
    free(d->groups);
    free(d->parked);
    free(d);
}

/* ---- the tables ---- */

typedef struct sort_key {
    uint64_t k1, k2, k3;
    uint32_t index;
} sort_key;

static int compare_sort_key(const void *a, const void *b)
{
    const sort_key *x = a, *y = b;
    if (x->k1 != y->k1)
        return x->k1 < y->k1 ? -1 : 1;
    if (x->k2 != y->k2)
        return x->k2 < y->k2 ? -1 : 1;
    if (x->k3 != y->k3)
        return x->k3 < y->k3 ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* The static orders that break ties among the candidates at the lowest offset. The first four
 * go along time from one end: the earliest-starting first, or the latest-ending first, then the
 * larger (or the longer-lived). With such an order the first candidate is the one at the edge
 * of the lowest gap, so the moment it starts at (or ends before: its anchor) is decided first:
 * which buffer fills it there, or none, which the floor check sees at once. That is what solves
 * packings. The next two are the best constructions' priorities (larger area, larger size
 * first): on loose instances a dive in that order is that construction, with backtracking
 * where the capacity is reached. The last three are MiniMalloc's: by the longest lifetime, the
 * largest area and the fullest moment a buffer lives through ("total": the buffers of the
 * fullest sections first), in the orders W-A-T, T-A-W and T-W-A. Restarts past the first turn
 * use perturbed copies of these (clrun__plan_decide_shuffle), so that a longer run is a new
 * search rather than the same one deeper. */
bool clrun__plan_decide_from_end(int r)
{
    return r == 1 || r == 3;
}

/* Builds static order r on first use (each is a sort of the part: not paid for orders the
 * restarts never reach). */
clrun_status clrun__plan_decide_ranking(clrun__plan_decide *d, int r)
{
    if (d->rank[r])
        return CLRUN_OK;
    sort_key *keys = malloc(d->m * sizeof *keys);
    d->rank[r] = malloc(d->m * sizeof *d->rank[r]);
    d->by_rank[r] = malloc(d->m * sizeof *d->by_rank[r]);
    if (!keys || !d->rank[r] || !d->by_rank[r]) {
        free(keys);
        free(d->rank[r]);
        free(d->by_rank[r]);
        d->rank[r] = d->by_rank[r] = NULL;
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    for (uint32_t i = 0; i < d->m; i++) {
        uint64_t size = d->size[i], span = d->to[i] - d->from[i];
        double area = (double)size * (double)span;
        uint64_t area_key = area >= 1.8e19 ? UINT64_MAX : (uint64_t)area;
        if (r < 4) {
            uint64_t along = clrun__plan_decide_from_end(r) ? UINT64_MAX - d->to[i] : d->from[i];
            uint64_t second = r < 2 ? UINT64_MAX - size : UINT64_MAX - span;
            keys[i] = (sort_key){along, second, 0, i};
        } else if (r == 4) {
            keys[i] = (sort_key){UINT64_MAX - area_key, UINT64_MAX - size, 0, i};
        } else if (r == 5) {
            keys[i] = (sort_key){UINT64_MAX - size, UINT64_MAX - span, 0, i};
        } else {
            uint64_t total = 0;
            for (uint32_t t = d->from[i]; t < d->to[i]; t++)
                if (d->sum0[t] > total)
                    total = d->sum0[t];
            uint64_t W = UINT64_MAX - span, A = UINT64_MAX - area_key, T = UINT64_MAX - total;
            keys[i] = r == 6 ? (sort_key){W, A, T, i}
                    : r == 7 ? (sort_key){T, A, W, i}
                             : (sort_key){T, W, A, i};
        }
    }
    qsort(keys, d->m, sizeof *keys, compare_sort_key);
    for (uint32_t p = 0; p < d->m; p++) {
        d->by_rank[r][p] = keys[p].index;
        d->rank[r][keys[p].index] = p;
    }
    free(keys);
    return CLRUN_OK;
}

/* A perturbed copy of static order `base` for restart `run`: each buffer moved later by a
 * random amount below an eighth of the part (the same for the same run), into d->shuffled_*:
 * neighbours in the order swap, the order's sweep along time or size stays. */
clrun_status clrun__plan_decide_shuffle(clrun__plan_decide *d, int base, uint64_t run)
{
    clrun_status st = clrun__plan_decide_ranking(d, base);
    if (st != CLRUN_OK)
        return st;
    if (!d->shuffled_rank) {
        d->shuffled_rank = malloc(d->m * sizeof *d->shuffled_rank);
        d->shuffled_by_rank = malloc(d->m * sizeof *d->shuffled_by_rank);
        if (!d->shuffled_rank || !d->shuffled_by_rank)
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    sort_key *keys = malloc(d->m * sizeof *keys);
    if (!keys)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    uint64_t rng = run * 0x9E3779B97F4A7C15u + (uint64_t)base;
    uint64_t spread = d->m / SHUFFLE_SPREAD + 2;
    for (uint32_t p = 0; p < d->m; p++) {
        uint32_t b = d->by_rank[base][p];
        keys[p] = (sort_key){p + clrun__plan_random_below(&rng, spread), p, 0, b};
    }
    qsort(keys, d->m, sizeof *keys, compare_sort_key);
    for (uint32_t p = 0; p < d->m; p++) {
        d->shuffled_by_rank[p] = keys[p].index;
        d->shuffled_rank[keys[p].index] = p;
    }
    free(keys);
    return CLRUN_OK;
}

/* The pairs of buffers alive together, both ways, as lists per buffer. */
static clrun_status build_overlaps(clrun__plan_decide *d, sort_key *keys)
{
    size_t m = d->m;
    for (uint32_t i = 0; i < m; i++)
        keys[i] = (sort_key){d->from[i], 0, 0, i};
    qsort(keys, m, sizeof *keys, compare_sort_key);
    d->ov_start = calloc(m + 1, sizeof *d->ov_start);
    if (!d->ov_start)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    uint64_t pairs = 0, steps = 0;
    for (size_t i = 0; i < m; i++) {
        uint32_t a = keys[i].index;
        for (size_t j = i + 1; j < m && d->from[keys[j].index] < d->to[a]; j++) {
            d->ov_start[a]++;
            d->ov_start[keys[j].index]++;
            if (++pairs > DECIDE_MAX_OVERLAPS)
                return CLRUN_ERROR_UNSUPPORTED; /* too dense to search */
        }
        steps += 1 + d->ov_start[a];
        if (steps > DECIDE_BUILD_CLOCK_EVERY) {
            steps = 0;
            if (clrun__plan_now() > d->build_deadline)
                return CLRUN_ERROR_UNSUPPORTED; /* no time left to search it */
        }
    }
    uint32_t total = 0;
    for (size_t i = 0; i <= m; i++) {
        uint32_t c = d->ov_start[i];
        d->ov_start[i] = total;
        total += c;
    }
    d->ov = malloc((total ? total : 1) * sizeof *d->ov);
    uint32_t *fill = malloc(m * sizeof *fill);
    if (!d->ov || !fill) {
        free(fill);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    memcpy(fill, d->ov_start, m * sizeof *fill);
    for (size_t i = 0; i < m; i++) {
        uint32_t a = keys[i].index;
        for (size_t j = i + 1; j < m && d->from[keys[j].index] < d->to[a]; j++) {
            uint32_t b = keys[j].index;
            d->ov[fill[a]++] = b;
            d->ov[fill[b]++] = a;
        }
    }
    free(fill);
    return CLRUN_OK;
}

/* Per moment: the buffers alive, their aligned total and the largest padding. */
static clrun_status build_sections(clrun__plan_decide *d)
{
    size_t m = d->m, T = d->moments;
    uint64_t entries = 0;
    for (size_t i = 0; i < m; i++)
        entries += d->to[i] - d->from[i];
    if (entries > DECIDE_MAX_SECTION_ENTRIES)
        return CLRUN_ERROR_UNSUPPORTED;
    d->sec_start = calloc(T + 1, sizeof *d->sec_start);
    d->sec = malloc((entries ? entries : 1) * sizeof *d->sec);
    d->pad = calloc(T ? T : 1, sizeof *d->pad);
    d->sum0 = calloc(T ? T : 1, sizeof *d->sum0);
    d->count0 = calloc(T ? T : 1, sizeof *d->count0);
    if (!d->sec_start || !d->sec || !d->pad || !d->sum0 || !d->count0)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    for (size_t i = 0; i < m; i++)
        for (uint32_t t = d->from[i]; t < d->to[i]; t++) {
            d->count0[t]++;
            d->sum0[t] += d->aligned[i];
            if (d->aligned[i] - d->size[i] > d->pad[t])
                d->pad[t] = d->aligned[i] - d->size[i];
        }
    uint32_t total = 0;
    for (size_t t = 0; t < T; t++) {
        d->sec_start[t] = total;
        total += d->count0[t];
    }
    d->sec_start[T] = total;
    uint32_t *fill = malloc((T ? T : 1) * sizeof *fill);
    if (!fill)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    memcpy(fill, d->sec_start, T * sizeof *fill);
    for (uint32_t i = 0; i < m; i++)
        for (uint32_t t = d->from[i]; t < d->to[i]; t++)
            d->sec[fill[t]++] = i;
    free(fill);
    d->cuts0 = calloc(T ? T : 1, sizeof *d->cuts0);
    d->cuts = malloc((T ? T : 1) * sizeof *d->cuts);
    d->starts = malloc((T ? T : 1) * sizeof *d->starts);
    d->start_sums = malloc((T + 1) * sizeof *d->start_sums);
    d->fresh = malloc((T ? T : 1) * sizeof *d->fresh);
    if (!d->cuts0 || !d->cuts || !d->starts || !d->start_sums || !d->fresh)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    for (size_t i = 0; i < m; i++)
        for (uint32_t t = d->from[i]; t + 1 < d->to[i]; t++)
            d->cuts0[t]++;
    return CLRUN_OK;
}

static clrun_status decide_init(clrun__plan_decide *d, const clrun_plan_buffer *buffers)
{
    size_t m = d->m;
    clrun_plan_buffer *local = malloc(m * sizeof *local);
    sort_key *keys = malloc(m * sizeof *keys);
    d->size = malloc(m * sizeof *d->size);
    d->aligned = malloc(m * sizeof *d->aligned);
    d->from = malloc(m * sizeof *d->from);
    d->to = malloc(m * sizeof *d->to);
    clrun_status st = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (local && keys && d->size && d->aligned && d->from && d->to) {
        for (size_t i = 0; i < m; i++) {
            local[i] = buffers[d->member[i]];
            d->size[i] = local[i].size;
            d->aligned[i] = clrun__decide_align_up(d, local[i].size);
        }
        size_t distinct = 0;
        st = clrun__plan_compress_time(local, m, d->from, d->to, &distinct);
        d->moments = distinct - 1;
    }
    if (st == CLRUN_OK)
        st = build_overlaps(d, keys);
    if (st == CLRUN_OK && clrun__plan_now() > d->build_deadline)
        st = CLRUN_ERROR_UNSUPPORTED;
    if (st == CLRUN_OK)
        st = build_sections(d);
    if (st == CLRUN_OK && clrun__plan_now() > d->build_deadline)
        st = CLRUN_ERROR_UNSUPPORTED;
    if (st == CLRUN_OK) {
        uint64_t work = 0; /* moments of the neighbours of every buffer */
        for (size_t i = 0; i < m; i++)
            for (uint32_t k = d->ov_start[i]; k < d->ov_start[i + 1]; k++)
                work += d->to[d->ov[k]] - d->from[d->ov[k]];
        d->floors = work / m <= DECIDE_FLOOR_WORK || work <= DECIDE_FLOOR_TOTAL;
    }
    free(local);
    free(keys);
    if (st != CLRUN_OK)
        return st;
    size_t T = d->moments ? d->moments : 1;
    d->placed = malloc(m * sizeof *d->placed);
    d->offset = malloc(m * sizeof *d->offset);
    d->end = malloc(m * sizeof *d->end);
    d->sum = malloc(T * sizeof *d->sum);
    d->count = malloc(T * sizeof *d->count);
    d->floor_at = malloc(T * sizeof *d->floor_at);
    d->holders = malloc(T * sizeof *d->holders);
    d->low = malloc(m * sizeof *d->low);
    d->frames = malloc((m + 1) * sizeof *d->frames);
    d->touched = malloc(T * sizeof *d->touched);
    d->groups = malloc((m + 1) * sizeof *d->groups);
    d->parked = malloc(m * sizeof *d->parked);
    d->trail_cap = 4 * m + 64;
    d->trail = malloc(d->trail_cap * sizeof *d->trail);
    if (!d->placed || !d->offset || !d->end || !d->sum || !d->count || !d->floor_at ||
        !d->holders || !d->low || !d->groups || !d->parked ||
        !d->frames || !d->touched || !d->trail || !clrun__plan_decide_tree_alloc(&d->key, m) ||
        !clrun__plan_decide_tree_alloc(&d->dead, m) || !clrun__plan_decide_tree_alloc(&d->stack, T))
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    return CLRUN_OK;
}

clrun_status clrun__plan_decide_new(const clrun_plan_buffer *buffers, const uint32_t *member,
                                    size_t m, uint64_t align, double deadline,
                                    clrun__plan_decide **out)
{
    *out = NULL;
    if (m == 0 || m >= (UINT32_C(1) << 29)) /* moments and holders fit in 30 bits */
        return CLRUN_ERROR_INVALID_ARGUMENT;
    if (clrun__plan_now() > deadline)
        return CLRUN_OK; /* no time to build it, let alone search it */
    clrun__plan_decide *d = calloc(1, sizeof *d);
    if (!d)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    d->m = m;
    d->member = member;
    d->align = align;
    d->build_deadline = deadline;
    clrun_status st = decide_init(d, buffers);
    if (st != CLRUN_OK) {
        clrun__plan_decide_free(d);
        return st == CLRUN_ERROR_UNSUPPORTED ? CLRUN_OK : st; /* too dense: *out stays NULL */
    }
    *out = d;
    return CLRUN_OK;
}

