/* clrun: the complete search. Can every buffer of one part fit under a capacity C?
 * After the ideas of MiniMalloc (Moffitt, ASPLOS 2023), not its code.
 *
 * Canonical plans. Take any plan under C and let buffers fall: move any buffer to the lowest
 * aligned offset where it fits among the others, until none moves (the sum of offsets falls
 * each time, so this ends, and the peak never grows). Sort the fallen plan by (offset, rank),
 * rank a fixed order of the buffers. Each buffer then lies at the lowest offset where it fits
 * among the buffers before it. The search builds such sequences: L is the offset of the buffer
 * placed last, m(b) the highest end of the placed buffers alive with b, a(b) = m(b) rounded up
 * to the alignment. Every placed buffer starts at or below L, so above L the arena over b's
 * lifetime is free from m(b) up, and:
 *  - the next buffer is some b with a(b) >= L, placed at a(b) (with a(b) == L only when b ranks
 *    after the last one: equal offsets in rank order). The candidates are tried in order of
 *    (a(b), rank): the dynamic order, lowest first; the static rank breaks ties, and restarts
 *    (the caller's) change it.
 *  - a buffer with a(b) < L ("pending") is never placed at a(b), and must not fit there: if
 *    a(b) + size(b) <= L, nothing placed from now on (all at L or above) can cover it, so b
 *    would fall. The node is pruned (dominance: the placement at L left a gap that b's
 *    minimum offset proves useless). The same holds before a placement: once some unplaced
 *    buffer (tried here, or pending) would fit wholly below the lowest candidate's offset,
 *    every candidate left at the node is dominated and the node fails (MiniMalloc's rule; it
 *    holds whether or not that buffer is alive with the candidate).
 *  - fail first (every other restart): among the candidates at the lowest offset, one that
 *    covers the moment of the current group with the least room to spare, and among those
 *    the moment the fewest candidates can cover (plan_decide.c, fail_first). A moment with no
 *    room left must be covered at that offset by one of them: trying them in turn decides it
 *    at once, where the static order reaches such a moment only after everything before it
 *    in time. The choice only orders the binary branching "c here, or c ruled out at this
 *    offset", so the search stays complete.
 *  - section bound: at each moment t the unplaced buffers alive then are stacked above the
 *    lowest of their minimum offsets ("unallocated floor", and never below L); with their
 *    aligned sizes, less the largest padding (the top one needs only its size), they must stay
 *    under C. The floors are kept per moment and recomputed only where the buffer holding the
 *    minimum changed; the moments' totals sit in a tree whose maximum checks L at once.
 *  - hatless: a candidate that raises nobody's minimum offset (every unplaced buffer alive
 *    with it already has m(b) above its end) is committed: if the search fails below it, it
 *    fails at this node too. A plan with another buffer first can always be rearranged into
 *    one with this buffer first, at the same or a lower peak.
 *  - groups (MiniMalloc's dynamic decomposition): once no unplaced buffer is alive across some
 *    moment's edge, the unplaced buffers on either side never meet again: the pieces are
 *    searched one after the other, each from the L of the placement that cut them, the others
 *    set aside (out of the candidates and of the pending check). When a piece fails, that
 *    placement fails at once: no arrangement of the pieces searched before can help, and
 *    trying them all again is what makes a plain depth-first search thrash.
 * Every change is recorded on a trail and undone on backtracking: nothing is copied per node.
 * Per node: O(k log n) for the k buffers alive with the placed one, plus the moments whose
 * floor holder changed. The search is iterative (the path can be as deep as the part). */
#include "plan/plan_decide.h"

#include <stdlib.h>
#include <string.h>

/* Nodes between clock reads. */
#define DECIDE_CLOCK_EVERY 64

#define NO_CHILD UINT32_MAX

/* ---- the min tree (with the leftmost argmin) ---- */

/* Rebuilds every inner node from the leaves. */
static void tree_build(min_tree *t)
{
    for (size_t j = t->leaves - 1; j >= 1; j--) {
        uint64_t l = t->node[2 * j], r = t->node[2 * j + 1];
        t->node[j] = l < r ? l : r;
    }
}

static void tree_set(min_tree *t, size_t i, uint64_t v)
{
    size_t j = t->leaves + i;
    t->node[j] = v;
    for (j /= 2; j >= 1; j /= 2) {
        uint64_t l = t->node[2 * j], r = t->node[2 * j + 1];
        uint64_t m = l < r ? l : r;
        if (t->node[j] == m)
            break; /* nothing above changes */
        t->node[j] = m;
    }
}

/* After leaves [lo, hi) were written directly: refresh their ancestors. */
static void tree_refresh(min_tree *t, size_t lo, size_t hi)
{
    size_t l = (t->leaves + lo) / 2, r = (t->leaves + hi - 1) / 2;
    for (; l >= 1; l /= 2, r /= 2)
        for (size_t j = l; j <= r; j++) {
            uint64_t a = t->node[2 * j], b = t->node[2 * j + 1];
            t->node[j] = a < b ? a : b;
        }
}

static uint64_t tree_min(const min_tree *t)
{
    return t->node[1];
}

/* The least leaf of [lo, hi). */
static uint64_t tree_range_min(const min_tree *t, size_t lo, size_t hi)
{
    uint64_t best = NONE;
    for (size_t a = lo + t->leaves, b = hi + t->leaves; a < b; a >>= 1, b >>= 1) {
        if ((a & 1) && t->node[a] < best)
            best = t->node[a];
        if (a & 1)
            a++;
        if (b & 1) {
            b--;
            if (t->node[b] < best)
                best = t->node[b];
        }
    }
    return best;
}

static size_t tree_argmin(const min_tree *t)
{
    size_t j = 1;
    while (j < t->leaves)
        j = t->node[2 * j] == t->node[j] ? 2 * j : 2 * j + 1;
    return j - t->leaves;
}

static uint64_t tree_leaf(const min_tree *t, size_t i)
{
    return t->node[t->leaves + i];
}

static uint64_t align_up(const clrun__plan_decide *d, uint64_t v)
{
    return clrun__decide_align_up(d, v);
}

/* ---- the state of a run: reset, trail ---- */

static uint64_t stack_leaf(const clrun__plan_decide *d, size_t t)
{
    if (d->count[t] == 0)
        return NONE;
    uint64_t pad = d->pad[t] < d->sum[t] ? d->pad[t] : d->sum[t];
    return NONE - (d->sum[t] - pad);
}

/* The most bytes still to stack at one moment (less the padding of the top). */
static uint64_t stack_max(const clrun__plan_decide *d)
{
    return NONE - tree_min(&d->stack);
}

/* The same over the current group's moments: only they are stacked from L up. */
static uint64_t group_stack_max(const clrun__plan_decide *d)
{
    const group *g = &d->groups[d->group_count - 1];
    uint64_t least = tree_range_min(&d->stack, g->lo, g->hi);
    return least == NONE ? 0 : NONE - least;
}

static void reset(clrun__plan_decide *d)
{
    size_t m = d->m, T = d->moments;
    memset(d->placed, 0, m * sizeof *d->placed);
    memset(d->end, 0, m * sizeof *d->end);
    memcpy(d->sum, d->sum0, T * sizeof *d->sum);
    memcpy(d->count, d->count0, T * sizeof *d->count);
    memset(d->low, 0, m * sizeof *d->low);
    for (size_t t = 0; t < T; t++) {
        d->floor_at[t] = d->count[t] ? 0 : NONE;
        d->holders[t] = d->count[t];
    }
    for (size_t p = 0; p < d->key.leaves; p++)
        d->key.node[d->key.leaves + p] = p < m ? 0 : NONE;
    tree_build(&d->key);
    for (size_t i = 0; i < d->dead.leaves; i++)
        d->dead.node[d->dead.leaves + i] = i < m ? d->size[i] : NONE;
    tree_build(&d->dead);
    for (size_t t = 0; t < d->stack.leaves; t++)
        d->stack.node[d->stack.leaves + t] = t < T ? stack_leaf(d, t) : NONE;
    tree_build(&d->stack);
    d->trail_len = 0;
    d->placed_count = 0;
    d->floor = 0;
    memcpy(d->cuts, d->cuts0, T * sizeof *d->cuts);
    memset(d->starts, 0, T * sizeof *d->starts);
    memset(d->start_sums, 0, (T + 1) * sizeof *d->start_sums);
    for (size_t i = 0; i < m; i++)
        d->starts[d->from[i]]++;
    for (size_t t = 1; t <= T; t++) { /* Fenwick build: each node adds itself to its parent */
        d->start_sums[t] += d->starts[t - 1];
        size_t up = t + (t & -t);
        if (up <= T)
            d->start_sums[up] += d->start_sums[t];
    }
    d->fresh_count = 0;
    d->groups[0] = (group){.lo = 0, .hi = (uint32_t)T, .left = (uint32_t)m, .cut_depth = NO_JUMP,
                           .floor = 0};
    d->group_count = 1;
}

static bool trail_push(clrun__plan_decide *d, uint32_t kind, uint32_t index, uint64_t value,
                       uint32_t aux)
{
    if (d->trail_len == d->trail_cap) {
        size_t cap = 2 * d->trail_cap;
        trail_entry *t = realloc(d->trail, cap * sizeof *t);
        if (!t)
            return false;
        d->trail = t;
        d->trail_cap = cap;
    }
    d->trail[d->trail_len++] = (trail_entry){index, kind << 30 | aux, value};
    return true;
}

static uint64_t key_of(const clrun__plan_decide *d, uint32_t b)
{
    return tree_leaf(&d->key, d->cur_rank[b]);
}

/* Sets b's candidate key, remembering the old one. */
static bool set_key(clrun__plan_decide *d, uint32_t b, uint64_t key)
{
    if (!trail_push(d, TRAIL_KEY, b, key_of(d, b), 0))
        return false;
    tree_set(&d->key, d->cur_rank[b], key);
    return true;
}

/* Undoes the trail down to `mark`. */
static void undo_to(clrun__plan_decide *d, size_t mark)
{
    while (d->trail_len > mark) {
        const trail_entry *e = &d->trail[--d->trail_len];
        switch (TRAIL_KIND(e)) {
        case TRAIL_KEY:
            tree_set(&d->key, d->cur_rank[e->index], e->value);
            if (TRAIL_AUX(e) == TRAIL_PARKED)
                tree_set(&d->dead, e->index, d->low[e->index] + d->size[e->index]);
            else if (TRAIL_AUX(e) == TRAIL_UNPARKED)
                tree_set(&d->dead, e->index, NONE);
            break;
        case TRAIL_END:
            d->end[e->index] = e->value;
            d->low[e->index] = align_up(d, e->value);
            tree_set(&d->dead, e->index, d->low[e->index] + d->size[e->index]);
            tree_set(&d->key, d->cur_rank[e->index], TRAIL_AUX(e) ? NONE : d->low[e->index]);
            break;
        case TRAIL_FLOOR:
            d->floor_at[e->index] = e->value;
            d->holders[e->index] = TRAIL_AUX(e);
            break;
        default:
            d->holders[e->index] = TRAIL_AUX(e);
            break;
        }
    }
}

/* ---- placing and unplacing ---- */

/* Buffer b, whose a(b) was `old`, leaves the floor of its moments (placed, or raised): the
 * holders of each floor it held drop by one, and the moments left with none are gathered in
 * d->touched for their floor to be recomputed. False when memory runs out. */
static bool leave_floors(clrun__plan_decide *d, uint32_t b, uint64_t old, size_t *touched)
{
    if (!d->floors)
        return true;
    for (uint32_t t = d->from[b]; t < d->to[b]; t++) {
        if (d->floor_at[t] != old)
            continue;
        if (!trail_push(d, TRAIL_HOLDERS, t, 0, d->holders[t]))
            return false;
        if (--d->holders[t] == 0)
            d->touched[(*touched)++] = t;
    }
    return true;
}

/* The floor of moment t, recomputed over its buffers, with its holders; false on no memory. */
static bool recompute_floor(clrun__plan_decide *d, uint32_t t)
{
    uint64_t low = NONE;
    uint32_t holders = 0;
    for (uint32_t k = d->sec_start[t]; k < d->sec_start[t + 1]; k++) {
        uint64_t a = d->low[d->sec[k]];
        if (a < low) {
            low = a;
            holders = 1;
        } else if (a == low) {
            holders++;
        }
    }
    if (!trail_push(d, TRAIL_FLOOR, t, d->floor_at[t], d->holders[t]))
        return false;
    d->floor_at[t] = low;
    d->holders[t] = low == NONE ? 0 : holders;
    return true;
}

/* Takes b out of the unplaced totals of its moments (or puts it back). */
static void account(clrun__plan_decide *d, uint32_t b, bool out)
{
    for (uint32_t t = d->from[b]; t < d->to[b]; t++) {
        if (out) {
            d->sum[t] -= d->aligned[b];
            d->count[t]--;
        } else {
            d->sum[t] += d->aligned[b];
            d->count[t]++;
        }
        d->stack.node[d->stack.leaves + t] = stack_leaf(d, t);
    }
    tree_refresh(&d->stack, d->from[b], d->to[b]);
    d->starts[d->from[b]] += out ? UINT32_MAX : 1; /* -1 or +1, modulo 2^32 */
    for (size_t i = (size_t)d->from[b] + 1; i <= d->moments; i += i & -i)
        d->start_sums[i] += out ? UINT32_MAX : 1;
    for (uint32_t t = d->from[b]; t + 1 < d->to[b]; t++) {
        if (out && --d->cuts[t] == 0)
            d->fresh[d->fresh_count++] = t;
        else if (!out)
            d->cuts[t]++;
    }
}

/* Raises the minimum offsets of the unplaced buffers alive with b, placed to end at `top`;
 * false when one of them no longer fits (or memory ran out: *oom). */
static bool raise_neighbours(clrun__plan_decide *d, uint32_t b, uint64_t top, size_t *touched,
                             bool *oom)
{
    bool fits = true;
    uint64_t new_a = align_up(d, top);
    for (uint32_t k = d->ov_start[b]; k < d->ov_start[b + 1]; k++) {
        uint32_t j = d->ov[k];
        if (d->placed[j] || d->end[j] >= top)
            continue;
        uint64_t old_a = d->low[j];
        uint32_t was_none = key_of(d, j) == NONE;
        if (!trail_push(d, TRAIL_END, j, d->end[j], was_none) ||
            (new_a != old_a && !leave_floors(d, j, old_a, touched))) {
            *oom = true;
            return false;
        }
        d->end[j] = top;
        d->low[j] = new_a;
        tree_set(&d->key, d->cur_rank[j], new_a);
        tree_set(&d->dead, j, new_a + d->size[j]);
        if (new_a + d->size[j] > d->capacity)
            fits = false;
    }
    return fits;
}

/* Without exact floors: every unplaced buffer alive during b's moments is raised above b, so
 * its top is a floor there (a weaker one: it misses raises from elsewhere). Checks them. */
static bool raise_tops(clrun__plan_decide *d, uint32_t b, uint64_t top, bool *ok)
{
    uint64_t high = align_up(d, top);
    for (uint32_t t = d->from[b]; t < d->to[b]; t++) {
        if (d->count[t] == 0 || d->floor_at[t] >= high)
            continue;
        if (!trail_push(d, TRAIL_FLOOR, t, d->floor_at[t], d->holders[t]))
            return false;
        d->floor_at[t] = high;
        if (high + (NONE - stack_leaf(d, t)) > d->capacity)
            *ok = false;
    }
    return true;
}

/* Places b at x as the next buffer of the sequence. False when the node this leads to is
 * pruned; the caller undoes the placement either way (unplace). */
static bool place(clrun__plan_decide *d, uint32_t b, uint64_t x, bool *oom)
{
    uint64_t top = x + d->size[b];
    size_t touched = 0;
    if (!set_key(d, b, NONE) || !leave_floors(d, b, d->low[b], &touched)) {
        *oom = true;
        return false;
    }
    d->placed[b] = true;
    d->low[b] = NONE;
    d->offset[b] = x;
    d->placed_count++;
    tree_set(&d->dead, b, NONE);
    d->floor = x;
    account(d, b, true);
    bool ok = raise_neighbours(d, b, top, &touched, oom);
    if (!d->floors && !raise_tops(d, b, top, &ok)) {
        *oom = true;
        return false;
    }
    for (size_t i = 0; i < touched && !*oom; i++) {
        uint32_t t = d->touched[i];
        if (!recompute_floor(d, t)) {
            *oom = true;
            break;
        }
        if (d->count[t] > 0) {
            uint64_t low = d->floor_at[t], base = low > x ? low : x;
            if (base + (NONE - stack_leaf(d, t)) > d->capacity)
                ok = false;
        }
    }
    if (*oom)
        return false;
    /* a pending buffer that fits below L; or some moment that cannot stack the rest above L */
    if (tree_min(&d->dead) <= x || x + group_stack_max(d) > d->capacity)
        ok = false;
    return ok;
}

static void unplace(clrun__plan_decide *d, const frame *f)
{
    uint32_t b = f->child;
    undo_to(d, f->child_mark);
    account(d, b, false);
    d->placed[b] = false;
    d->placed_count--;
    d->low[b] = align_up(d, d->end[b]);
    tree_set(&d->dead, b, d->low[b] + d->size[b]);
    d->floor = f->floor;
    d->group_count = f->group_count;
    d->groups[d->group_count - 1] = f->top;
}

/* ---- groups ---- */

/* Sets aside the unplaced buffers of moments [lo, hi) for a later group (out of the candidates
 * and of the pending check), or takes them back; false on no memory. */
static bool park(clrun__plan_decide *d, uint32_t lo, uint32_t hi, bool back)
{
    for (uint32_t t = lo; t < hi; t++) {
        if (d->starts[t] == 0)
            continue;
        for (uint32_t k = d->sec_start[t]; k < d->sec_start[t + 1]; k++) {
            uint32_t b = d->sec[k];
            if (d->placed[b] || d->from[b] != t)
                continue;
            if (!trail_push(d, TRAIL_KEY, b, key_of(d, b), back ? TRAIL_UNPARKED : TRAIL_PARKED))
                return false;
            if (back) {
                tree_set(&d->key, d->cur_rank[b], d->parked[b]);
                tree_set(&d->dead, b, d->low[b] + d->size[b]);
            } else {
                d->parked[b] = key_of(d, b);
                tree_set(&d->key, d->cur_rank[b], NONE);
                tree_set(&d->dead, b, NONE);
            }
        }
    }
    return true;
}

/* Unplaced buffers starting before moment t: O(log T). */
static uint32_t starting_before(const clrun__plan_decide *d, size_t t)
{
    uint32_t count = 0;
    for (; t > 0; t -= t & -t)
        count += d->start_sums[t];
    return count;
}

/* Unplaced buffers starting in moments [lo, hi). */
static uint32_t starting_in(const clrun__plan_decide *d, uint32_t lo, uint32_t hi)
{
    return starting_before(d, hi) - starting_before(d, lo);
}

/* After the child of node `depth` was placed at x: the current group done, the next one
 * starts (from the L of the placement that made it, and failing there fails that placement);
 * or, if the placement cut the current group where no unplaced buffer crosses, its pieces
 * become groups, searched one after the other, the first at once. *floor and *jump are the
 * next node's L and jump. False on no memory. */
static bool regroup(clrun__plan_decide *d, size_t depth, uint64_t x, uint64_t *floor,
                    uint32_t *jump)
{
    group *g = &d->groups[d->group_count - 1];
    *floor = x;
    *jump = NO_JUMP;
    if (--g->left == 0) {
        d->group_count--;
        if (d->group_count == 0)
            return true;
        group *next = &d->groups[d->group_count - 1];
        d->floor = *floor = next->floor;
        *jump = next->cut_depth;
        return park(d, next->lo, next->hi, true);
    }
    if (d->fresh_count == 0)
        return true;
    /* The pieces with buffers left, over the current group's slot and above. Only the edges
     * this placement emptied can split off buffers: an edge emptied earlier had none on one
     * side already (else the group would have been cut there), so it is ignored. */
    group whole = *g;
    size_t base = d->group_count - 1, pieces = 0, largest = 0;
    uint32_t start = whole.lo;
    for (size_t i = 0; i <= d->fresh_count; i++) {
        uint32_t end = i < d->fresh_count ? d->fresh[i] + 1 : whole.hi;
        if (end <= start || end > whole.hi)
            continue;
        uint32_t left = starting_in(d, start, end);
        if (left > 0) {
            if (pieces == 0 || left > d->groups[base + largest].left)
                largest = pieces;
            d->groups[base + pieces++] = (group){.lo = start, .hi = end, .left = left,
                                                 .cut_depth = (uint32_t)depth, .floor = x};
        }
        start = end;
    }
    if (pieces < 2) {
        *g = whole; /* nothing split off */
        return true;
    }
    /* The largest piece on top, searched first; the others are set aside until their turn: each
     * buffer is set aside only while in a smaller piece, so at most log m times in all. */
    group top = d->groups[base + largest];
    d->groups[base + largest] = d->groups[base + pieces - 1];
    d->groups[base + pieces - 1] = top;
    d->group_count = base + pieces;
    for (size_t i = base; i + 1 < d->group_count; i++)
        if (!park(d, d->groups[i].lo, d->groups[i].hi, false))
            return false;
    return true;
}

/* True when placing b at x raises no unplaced buffer's minimum offset. */
static bool hatless(const clrun__plan_decide *d, uint32_t b, uint64_t x)
{
    uint64_t top = x + d->size[b];
    for (uint32_t k = d->ov_start[b]; k < d->ov_start[b + 1]; k++) {
        uint32_t j = d->ov[k];
        if (!d->placed[j] && d->end[j] < top)
            return false;
    }
    return true;
}

/* ---- the search ---- */

/* Whether the unplaced buffers alive at moment t can still stack under the capacity, with the
 * tightest floor known: a candidate goes no lower than its key, a buffer ruled out at its
 * level (tried, or pending below L) no lower than the next aligned offset above it. */
static bool section_can_stack(const clrun__plan_decide *d, uint32_t t)
{
    if (d->count[t] == 0)
        return true;
    uint64_t low = NONE;
    for (uint32_t k = d->sec_start[t]; k < d->sec_start[t + 1]; k++) {
        uint32_t b = d->sec[k];
        if (d->placed[b])
            continue;
        uint64_t key = key_of(d, b), at;
        if (key != NONE) {
            at = key;
        } else {
            uint64_t a = align_up(d, d->end[b]);
            at = (a > d->floor ? a : d->floor) + d->align;
        }
        if (at < low)
            low = at;
    }
    return low + (NONE - stack_leaf(d, t)) <= d->capacity;
}

/* After candidate c is ruled out at its level: can the moments it would have covered still
 * stack what is left? Its anchor (the moment at the edge of the gap it was tried in) always;
 * all of its moments where that is cheap (the parts whose floors are kept). */
static bool tried_leaves_room(const clrun__plan_decide *d, uint32_t c)
{
    if (!d->floors)
        return section_can_stack(d, d->from_end ? d->to[c] - 1 : d->from[c]);
    for (uint32_t t = d->from[c]; t < d->to[c]; t++)
        if (!section_can_stack(d, t))
            return false;
    return true;
}

/* Fail first: among the moments of the current group whose floor is the lowest offset y, the
 * one with the least room to spare (capacity less floor less the bytes still to stack there),
 * and among those the one the fewest candidates at y can cover; the candidate covering it that
 * ranks first. Every moment at zero room must be covered at y by one of them, so trying them
 * in turn there (each ruled out after it fails) decides that moment at once, where the static
 * order would decide moments in time order and find a moment's last option excluded only
 * deep below. NO_CHILD when no candidate at y covers such a moment (the static order then). */
static uint32_t fail_first(const clrun__plan_decide *d, uint64_t y)
{
    const group *g = &d->groups[d->group_count - 1];
    uint64_t best_room = NONE;
    uint32_t best_count = UINT32_MAX, best = NO_CHILD;
    for (uint32_t t = g->lo; t < g->hi; t++) {
        if (d->count[t] == 0)
            continue;
        uint64_t base = d->floor_at[t] > d->floor ? d->floor_at[t] : d->floor;
        if (base != y)
            continue;
        uint64_t need = base + (NONE - stack_leaf(d, t));
        uint64_t room = need >= d->capacity ? 0 : d->capacity - need;
        if (room > best_room)
            continue;
        uint32_t count = 0, pick = NO_CHILD;
        for (uint32_t k = d->sec_start[t]; k < d->sec_start[t + 1]; k++) {
            uint32_t b = d->sec[k];
            if (d->placed[b] || key_of(d, b) != y)
                continue;
            count++;
            if (pick == NO_CHILD || d->cur_rank[b] < d->cur_rank[pick])
                pick = b;
        }
        if (count == 0 || (room == best_room && count >= best_count))
            continue;
        best_room = room;
        best_count = count;
        best = pick;
        if (room == 0 && count == 1)
            break; /* forced: nothing decides sooner */
    }
    return best;
}

/* The next candidate of the node, or NO_CHILD when none is left; those that cannot come next
 * are marked tried on the way. *x gets its offset. */
static uint32_t next_candidate(clrun__plan_decide *d, uint64_t *x, bool *oom)
{
    for (;;) {
        uint64_t y = tree_min(&d->key);
        if (y == NONE || y >= d->capacity)
            return NO_CHILD;
        if (tree_min(&d->dead) <= y)
            return NO_CHILD; /* a buffer fits below every candidate left: all dominated */
        uint32_t c = d->floors && d->fail_first ? fail_first(d, y) : NO_CHILD;
        if (c == NO_CHILD)
            c = d->cur_by_rank[tree_argmin(&d->key)];
        bool skip = y + d->size[c] > d->capacity;
        if (!skip) {
            *x = y;
            return c;
        }
        if (!set_key(d, c, NONE)) {
            *oom = true;
            return NO_CHILD;
        }
    }
}

clrun__plan_outcome clrun__plan_decide_run(clrun__plan_decide *d, uint64_t capacity, int ranking,
                                           uint64_t max_nodes, double deadline,
                                           uint64_t *offsets, uint64_t *nodes)
{
    *nodes = 0;
    int r = ranking % CLRUN__PLAN_RANKINGS;
    if (clrun__plan_decide_ranking(d, r) != CLRUN_OK)
        return CLRUN__PLAN_NO_MEMORY;
    d->capacity = capacity;
    d->cur_rank = d->rank[ranking % CLRUN__PLAN_RANKINGS];
    d->cur_by_rank = d->by_rank[ranking % CLRUN__PLAN_RANKINGS];
    if (ranking >= CLRUN__PLAN_RANKINGS) {
        if (clrun__plan_decide_shuffle(d, r, (uint64_t)ranking) != CLRUN_OK)
            return CLRUN__PLAN_NO_MEMORY;
        d->cur_rank = d->shuffled_rank;
        d->cur_by_rank = d->shuffled_by_rank;
    }
    d->from_end = clrun__plan_decide_from_end(ranking % CLRUN__PLAN_RANKINGS);
    d->fail_first = ranking & 1;
    reset(d);
    /* the root: every buffer must fit, and every moment's stack */
    if (stack_max(d) > capacity)
        return CLRUN__PLAN_INFEASIBLE;
    for (size_t i = 0; i < d->m; i++)
        if (d->size[i] > capacity)
            return CLRUN__PLAN_INFEASIBLE;
    size_t depth = 0;
    bool oom = false;
    d->frames[0] = (frame){.trail_mark = 0, .floor = 0, .child = NO_CHILD, .jump = NO_JUMP};
    for (;;) {
        frame *f = &d->frames[depth];
        if (f->child != NO_CHILD) {
            /* the child failed (or was pruned): undo it, then it is tried */
            unplace(d, f);
            uint32_t c = f->child;
            f->child = NO_CHILD;
            if (f->forced)
                goto fail; /* a hatless buffer has no alternatives */
            if (!set_key(d, c, NONE)) {
                oom = true;
                goto fail;
            }
            if (!tried_leaves_room(d, c))
                goto fail;
        }
        uint64_t x = 0;
        uint32_t c = next_candidate(d, &x, &oom);
        if (c == NO_CHILD)
            goto fail;
        if (*nodes >= max_nodes ||
            (++*nodes % DECIDE_CLOCK_EVERY == 0 && clrun__plan_now() > deadline))
            return CLRUN__PLAN_LIMIT;
        f->forced = hatless(d, c, x);
        f->child = c;
        f->child_mark = d->trail_len;
        f->group_count = d->group_count;
        f->top = d->groups[d->group_count - 1];
        d->fresh_count = 0;
        if (!place(d, c, x, &oom)) {
            if (oom)
                return CLRUN__PLAN_NO_MEMORY;
            continue; /* pruned: the loop undoes it */
        }
        if (d->placed_count == d->m) {
            for (size_t i = 0; i < d->m; i++)
                offsets[d->member[i]] = d->offset[i];
            return CLRUN__PLAN_FOUND;
        }
        uint64_t floor;
        uint32_t jump;
        if (!regroup(d, depth, x, &floor, &jump))
            return CLRUN__PLAN_NO_MEMORY;
        depth++;
        d->frames[depth] = (frame){.trail_mark = d->trail_len, .floor = floor, .child = NO_CHILD,
                                   .jump = jump};
        continue;
    fail:
        if (oom)
            return CLRUN__PLAN_NO_MEMORY;
        undo_to(d, f->trail_mark);
        if (f->jump != NO_JUMP) {
            /* a group failed: whatever the groups before it did, the placement that made it
             * fails; undo everything above that node */
            for (size_t k = depth; k-- > f->jump + 1;)
                unplace(d, &d->frames[k]);
            depth = f->jump;
            continue;
        }
        if (depth == 0)
            return CLRUN__PLAN_INFEASIBLE;
        depth--;
    }
}
