/* clrun: the greedy best-fit planner (XLA GlobalDecreasingSizeBestFitHeap, TFLite greedy by size).
 *
 * Buffers are placed one at a time in a fixed order. For each, the already placed buffers that
 * overlap it in time are gathered, sorted by offset, and the gaps between them scanned: the
 * buffer goes into the smallest gap that holds it (ties to the lower offset), or on top of all
 * of them when none does. That is best fit in one dimension over the buffer's whole lifetime.
 *
 * Finding the overlapping buffers is what would make this O(n^2). Here a segment tree over the
 * buffers sorted by `first` keeps, per node, the largest `last` among placed buffers in its
 * range; a query walks only into subtrees that hold a placed buffer ending after the new one
 * starts, among those starting before it ends. A step costs O((k + 1) log n + k log k) for k
 * overlapping placed buffers, so a whole pass is about O(n log n) when few buffers are alive at
 * once. The same decoder, with insert/remove, drives the local search (plan_search.c). */
#include "plan/plan_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- orders ---- */

/* Digits of the radix sort, and the keys below which an insertion sort is used instead. */
#define SORT_BITS 11
#define SORT_SMALL 64

void clrun__plan_sort_keys(clrun__plan_key *keys, size_t n, clrun__plan_key *scratch)
{
    if (n < SORT_SMALL) {
        for (size_t i = 1; i < n; i++) {
            clrun__plan_key x = keys[i];
            size_t j = i;
            for (; j > 0 && keys[j - 1].key > x.key; j--)
                keys[j] = keys[j - 1];
            keys[j] = x;
        }
        return;
    }
    /* the bits that differ between keys: only their digits need a pass */
    uint64_t all_or = 0, all_and = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        all_or |= keys[i].key;
        all_and &= keys[i].key;
    }
    uint64_t differ = all_or ^ all_and;
    clrun__plan_key *from = keys, *to = scratch;
    size_t count[(size_t)1 << SORT_BITS];
    const uint64_t mask = ((uint64_t)1 << SORT_BITS) - 1;
    for (unsigned shift = 0; shift < 64; shift += SORT_BITS) {
        if (((differ >> shift) & mask) == 0)
            continue;
        memset(count, 0, sizeof count);
        for (size_t i = 0; i < n; i++)
            count[(from[i].key >> shift) & mask]++;
        size_t sum = 0;
        for (size_t d = 0; d <= mask; d++) {
            size_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            to[count[(from[i].key >> shift) & mask]++] = from[i];
        clrun__plan_key *t = from;
        from = to;
        to = t;
    }
    if (from != keys)
        memcpy(keys, from, n * sizeof *keys);
}

/* Descending by v, as an ascending key. */
static uint64_t descending(uint64_t v)
{
    return UINT64_MAX - v;
}

/* size * lifetime can exceed 64 bits; as a double it keeps its order well enough for a
 * heuristic, and a non-negative double's bit pattern sorts like its value. */
static uint64_t area_key(const clrun_plan_buffer *b)
{
    double area = (double)b->size * (double)(b->last - b->first);
    uint64_t bits;
    memcpy(&bits, &area, sizeof bits);
    return bits;
}

/* The key of buffer b for one pass of an order: the minor key first (1), then the major (0). */
static uint64_t order_key(const clrun_plan_buffer *b, clrun_plan_order order, int major)
{
    uint64_t span = b->last - b->first;
    switch (order) {
    case CLRUN_PLAN_ORDER_SIZE: /* larger first, then earlier first */
        return major ? descending(b->size) : b->first;
    case CLRUN_PLAN_ORDER_SPATIAL: /* larger first, then longer-lived first */
        return major ? descending(b->size) : descending(span);
    case CLRUN_PLAN_ORDER_TEMPORAL: /* longer-lived first, then larger first */
        return major ? descending(span) : descending(b->size);
    default: /* larger size x lifetime first, then larger first */
        return major ? descending(area_key(b)) : descending(b->size);
    }
}

/* Ties of both keys go to the lower index: two stable passes over the indices in order. */
clrun_status clrun__plan_order_fill(const clrun_plan_buffer *buffers, size_t n,
                                    clrun_plan_order order, uint32_t *indices)
{
    if ((unsigned)order >= CLRUN_PLAN_ORDER_COUNT)
        return CLRUN_ERROR_INVALID_ARGUMENT;
    clrun__plan_key *keys = malloc((n ? n : 1) * sizeof *keys);
    clrun__plan_key *scratch = malloc((n ? n : 1) * sizeof *scratch);
    if (!keys || !scratch) {
        free(keys);
        free(scratch);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    for (size_t i = 0; i < n; i++)
        keys[i] = (clrun__plan_key){order_key(&buffers[i], order, 0), (uint32_t)i};
    clrun__plan_sort_keys(keys, n, scratch);
    for (size_t i = 0; i < n; i++)
        keys[i].key = order_key(&buffers[keys[i].index], order, 1);
    clrun__plan_sort_keys(keys, n, scratch);
    for (size_t i = 0; i < n; i++)
        indices[i] = keys[i].index;
    free(keys);
    free(scratch);
    return CLRUN_OK;
}

const char *clrun_plan_order_name(clrun_plan_order order)
{
    switch (order) {
    case CLRUN_PLAN_ORDER_SIZE:
        return "greedy-size";
    case CLRUN_PLAN_ORDER_SPATIAL:
        return "xla-spatial";
    case CLRUN_PLAN_ORDER_TEMPORAL:
        return "xla-temporal";
    case CLRUN_PLAN_ORDER_AREA:
        return "greedy-area";
    default:
        return "unknown";
    }
}

/* ---- the decoder ---- */

clrun_status clrun__plan_sort_by_first(const clrun_plan_buffer *buffers, size_t n,
                                       uint32_t *indices)
{
    clrun__plan_key *keys = malloc((n ? n : 1) * sizeof *keys);
    clrun__plan_key *scratch = malloc((n ? n : 1) * sizeof *scratch);
    if (!keys || !scratch) {
        free(keys);
        free(scratch);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    for (size_t i = 0; i < n; i++)
        keys[i] = (clrun__plan_key){buffers[i].first, (uint32_t)i};
    clrun__plan_sort_keys(keys, n, scratch); /* stable: ties by index */
    for (size_t i = 0; i < n; i++)
        indices[i] = keys[i].index;
    free(keys);
    free(scratch);
    return CLRUN_OK;
}

clrun_status clrun__plan_decoder_init(clrun__plan_decoder *d, const clrun_plan_buffer *buffers,
                                      size_t n, uint64_t align)
{
    memset(d, 0, sizeof *d);
    d->buffers = buffers;
    d->n = n;
    d->align = align;
    d->leaves = 1;
    while (d->leaves < n)
        d->leaves *= 2;
    size_t m = n ? n : 1;
    d->offset = calloc(m, sizeof *d->offset);
    d->by_first = malloc(m * sizeof *d->by_first);
    d->sorted_first = malloc(m * sizeof *d->sorted_first);
    d->rank = malloc(m * sizeof *d->rank);
    d->tree = calloc(2 * d->leaves, sizeof *d->tree);
    d->spans = malloc(m * sizeof *d->spans);
    if (!d->offset || !d->by_first || !d->sorted_first || !d->rank || !d->tree || !d->spans ||
        clrun__plan_sort_by_first(buffers, n, d->by_first) != CLRUN_OK) {
        clrun__plan_decoder_free(d);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    for (size_t i = 0; i < n; i++) {
        d->sorted_first[i] = buffers[d->by_first[i]].first;
        d->rank[d->by_first[i]] = (uint32_t)i;
    }
    return CLRUN_OK;
}

void clrun__plan_decoder_free(clrun__plan_decoder *d)
{
    free(d->offset);
    free(d->by_first);
    free(d->sorted_first);
    free(d->rank);
    free(d->tree);
    free(d->spans);
    memset(d, 0, sizeof *d);
}

void clrun__plan_decoder_clear(clrun__plan_decoder *d)
{
    memset(d->tree, 0, 2 * d->leaves * sizeof *d->tree);
}

/* Sets the leaf of rank r and refreshes the maxima above it. */
static void tree_set(clrun__plan_decoder *d, size_t r, uint64_t value)
{
    size_t node = d->leaves + r;
    d->tree[node] = value;
    for (node /= 2; node >= 1; node /= 2) {
        uint64_t left = d->tree[2 * node], right = d->tree[2 * node + 1];
        uint64_t max = left > right ? left : right;
        if (d->tree[node] == max)
            break; /* nothing above changes either */
        d->tree[node] = max;
    }
}

void clrun__plan_decoder_insert(clrun__plan_decoder *d, uint32_t b, uint64_t offset)
{
    d->offset[b] = offset;
    tree_set(d, d->rank[b], d->buffers[b].last);
}

void clrun__plan_decoder_remove(clrun__plan_decoder *d, uint32_t b)
{
    tree_set(d, d->rank[b], 0);
}

/* Number of buffers whose first is < t: they are the ones that may overlap [., t). */
static size_t count_first_below(const clrun__plan_decoder *d, uint64_t t)
{
    return clrun__plan_lower_bound(d->sorted_first, d->n, t);
}

/* Subtrees of this many leaves or fewer are read leaf by leaf: the leaves lie side by side,
 * and a short loop that compares each costs less than the walk's branches down to the few
 * that qualify (measured: 8-10 % off a best-fit pass on random 62k, 47 alive at once). */
#define COLLECT_SCAN 32

/* Appends to d->spans the placed buffers of rank < limit whose last is > after. Leaves hold 0
 * when unplaced, and last >= 1 always, so "> after" also means "placed". A depth-first walk
 * with its own stack (left child on top, so ranks come out in order, though the order does
 * not matter: the spans are sorted next): every node it enters holds such a buffer, the walk
 * costs O(k log n) for k of them, without a call per node. */
static size_t collect(const clrun__plan_decoder *d, size_t limit, uint64_t after)
{
    size_t count = 0;
    if (limit == 0 || d->tree[1] <= after)
        return 0;
    size_t node_stack[2 * 64], lo_stack[2 * 64], width_stack[2 * 64], top = 0;
    node_stack[0] = 1;
    lo_stack[0] = 0;
    width_stack[0] = d->leaves;
    top = 1;
    while (top > 0) {
        top--;
        size_t node = node_stack[top], lo = lo_stack[top], width = width_stack[top];
        /* descend the left spine, stacking right children that qualify */
        while (width > COLLECT_SCAN) {
            size_t half = width / 2, left = 2 * node, right = left + 1;
            bool go_left = d->tree[left] > after;
            bool go_right = lo + half < limit && d->tree[right] > after;
            if (go_left && go_right) {
                node_stack[top] = right;
                lo_stack[top] = lo + half;
                width_stack[top] = half;
                top++;
                node = left;
            } else if (go_left) {
                node = left;
            } else if (go_right) {
                node = right;
                lo += half;
            } else {
                break;
            }
            width = half;
        }
        if (width <= COLLECT_SCAN) {
            /* a few leaves side by side: read them all rather than walk down to each */
            const uint64_t *leaf = d->tree + d->leaves;
            size_t end = lo + width < limit ? lo + width : limit;
            for (size_t r = lo; r < end; r++) {
                if (leaf[r] > after) {
                    uint32_t b = d->by_first[r];
                    d->spans[count].lo = d->offset[b];
                    d->spans[count].hi = d->offset[b] + d->buffers[b].size;
                    count++;
                }
            }
        }
    }
    return count;
}

/* Sorts spans by offset. The gap scan does this once per placement, on the k overlapping
 * buffers, so it dominates dense instances; an inlined quicksort (median of three, insertion
 * sort below 16, recursion on the smaller side only) runs several times faster than qsort's
 * indirect comparisons. */
void clrun__plan_sort_spans(clrun__plan_span *a, size_t count)
{
    while (count > 16) {
        size_t mid = count / 2, last = count - 1;
        /* median of three into a[mid] */
        if (a[mid].lo < a[0].lo) {
            clrun__plan_span t = a[mid]; a[mid] = a[0]; a[0] = t;
        }
        if (a[last].lo < a[mid].lo) {
            clrun__plan_span t = a[last]; a[last] = a[mid]; a[mid] = t;
            if (a[mid].lo < a[0].lo) {
                t = a[mid]; a[mid] = a[0]; a[0] = t;
            }
        }
        uint64_t pivot = a[mid].lo;
        size_t i = 0, j = last;
        for (;;) {
            while (a[i].lo < pivot)
                i++;
            while (a[j].lo > pivot)
                j--;
            if (i >= j)
                break;
            clrun__plan_span t = a[i]; a[i] = a[j]; a[j] = t;
            i++;
            j--;
        }
        /* [0, j] <= pivot <= [j + 1, count) */
        size_t left = j + 1;
        if (left < count - left) {
            clrun__plan_sort_spans(a, left);
            a += left;
            count -= left;
        } else {
            clrun__plan_sort_spans(a + left, count - left);
            count = left;
        }
    }
    for (size_t i = 1; i < count; i++) {
        clrun__plan_span x = a[i];
        size_t j = i;
        for (; j > 0 && a[j - 1].lo > x.lo; j--)
            a[j] = a[j - 1];
        a[j] = x;
    }
}

/* Gathers the placed buffers overlapping b in time into d->spans, sorted by offset. */
static size_t overlapping_spans(clrun__plan_decoder *d, uint32_t b)
{
    const clrun_plan_buffer *buf = &d->buffers[b];
    size_t limit = count_first_below(d, buf->last);
    size_t k = collect(d, limit, buf->first);
    clrun__plan_sort_spans(d->spans, k);
    d->work += k + 1;
    return k;
}

uint64_t clrun__plan_decoder_fit(clrun__plan_decoder *d, uint32_t b)
{
    uint64_t size = d->buffers[b].size;
    size_t k = overlapping_spans(d, b);
    uint64_t best_offset = 0, best_waste = UINT64_MAX;
    uint64_t top = 0; /* highest end seen so far: the gap starts there */
    for (size_t i = 0; i < k; i++) {
        const clrun__plan_span *s = &d->spans[i];
        uint64_t start = clrun__plan_align_up(top, d->align);
        if (s->lo > start && s->lo - start >= size) {
            uint64_t waste = s->lo - start - size;
            if (waste < best_waste) {
                best_waste = waste;
                best_offset = start;
            }
        }
        if (s->hi > top)
            top = s->hi;
    }
    if (best_waste != UINT64_MAX)
        return best_offset;
    return clrun__plan_align_up(top, d->align);
}

bool clrun__plan_decoder_late(clrun__plan_decoder *d, double deadline)
{
    if (d->work < CLRUN__PLAN_DECODER_CLOCK_WORK)
        return false;
    d->work = 0;
    return clrun__plan_now() > deadline;
}

uint64_t clrun__plan_decoder_run(clrun__plan_decoder *d, const uint32_t *order, double deadline,
                                 uint64_t *offsets)
{
    clrun__plan_decoder_clear(d);
    uint64_t peak = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (clrun__plan_decoder_late(d, deadline))
            return UINT64_MAX;
        uint32_t b = order[i];
        uint64_t offset = clrun__plan_decoder_fit(d, b);
        clrun__plan_decoder_insert(d, b, offset);
        offsets[b] = offset;
        if (offset + d->buffers[b].size > peak)
            peak = offset + d->buffers[b].size;
    }
    return peak;
}

clrun_status clrun_plan_greedy(const clrun_plan_buffer *buffers, size_t n, uint64_t alignment,
                               clrun_plan_order order, uint64_t *offsets, uint64_t *peak)
{
    uint64_t align;
    clrun_status st = clrun__plan_check(buffers, n, alignment, &align);
    if (st != CLRUN_OK)
        return st;
    if ((unsigned)order >= CLRUN_PLAN_ORDER_COUNT || !peak || (n > 0 && !offsets))
        return CLRUN_ERROR_INVALID_ARGUMENT;
    uint32_t *indices = malloc((n ? n : 1) * sizeof *indices);
    if (!indices)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    /* the same plan either way: the interval sets where many buffers are alive together */
    uint64_t bound;
    uint32_t alive = 0;
    st = clrun__plan_order_fill(buffers, n, order, indices);
    if (st == CLRUN_OK)
        st = clrun__plan_bound(buffers, n, align, &bound, &alive);
    if (st == CLRUN_OK && alive >= CLRUN__PLAN_FIT_DENSE) {
        clrun__plan_fit f;
        st = clrun__plan_fit_init(&f, buffers, n, align);
        if (st == CLRUN_OK) {
            st = clrun__plan_fit_run(&f, indices, INFINITY, offsets, peak);
            clrun__plan_fit_free(&f);
        }
    } else if (st == CLRUN_OK) {
        clrun__plan_decoder d;
        st = clrun__plan_decoder_init(&d, buffers, n, align);
        if (st == CLRUN_OK) {
            *peak = clrun__plan_decoder_run(&d, indices, INFINITY, offsets);
            clrun__plan_decoder_free(&d);
        }
    }
    free(indices);
    return st;
}
