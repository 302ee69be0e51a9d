/* clrun: best fit in O(log T) interval sets per placement, for the fixed-order constructions.
 *
 * Best fit places a buffer alive over [f, l) into the smallest gap (then the lowest) of the
 * bytes taken by the placed buffers alive at some moment of [f, l), or on top of them. Only
 * the union of those bytes matters, not which buffer holds them. So instead of gathering
 * every overlapping placed buffer and sorting them by offset (O(k log k) for k of them, which
 * is most of the time on dense instances: k is the hundreds alive together, times the
 * buffers alive over a long lifetime), a segment tree over the compressed time axis keeps, per
 * node, the union of the bytes placed there as a sorted set of disjoint intervals:
 *   whole[N]: bytes of the buffers whose canonical cover includes N (alive over all of it);
 *   under[N]: bytes of the buffers stored at N or below it (alive at some moment of N).
 * A buffer goes into whole[] and under[] of its O(log T) canonical nodes and into under[] of
 * the nodes on the two paths from its first and last moment up to the root that reach past its
 * lifetime: those are exactly the strict ancestors of its canonical nodes. A query for [f, l)
 * takes under[] of its canonical nodes and whole[] of the nodes on its two boundary paths that
 * reach past [f, l): every buffer alive during [f, l) is in one of them (its canonical node
 * holding a query node is on the query's paths; one inside a query node has it among its own
 * ancestors; a path node inside [f, l) is a canonical node or below one, whose under[] holds
 * its whole[]). The query starts from one free region, [0, infinity), and cuts each set's
 * intervals out of the regions left, keeping only the regions the buffer still fits in: a
 * region too small stays too small. So a placement costs O(log T) sets times the gaps that fit
 * it (tens on dense packings), not a sort of every buffer alive with it; the sets coalesce as
 * the arena fills. Measured at 62k buffers with 1225 alive at once: 0.9 s where the sorted
 * scan takes 3.4 s; slower than the scan where few are alive (hence CLRUN__PLAN_FIT_DENSE).
 * Worst case O(n) regions per placement, as the scan.
 *
 * Where the time goes there (balanced, 62k): about 60 % in the cuts, a query reading some 21
 * sets (15 of them whole[] on the paths) against some 33 regions each, 20 % adding to the
 * sets, the rest sorting and page faults. The cost is the first touch of each set rather than
 * its size: intervals of 8 bytes instead of 16 gained 13 %, and neither storing the sets in
 * one pool nor merging whole[] over bands of levels (fewer sets per query, more per insertion)
 * gained anything measurable; asking for every set before the first cut did.
 * Counted there (greedy by size): a query reads 27 sets (6 empty, 21 intervals on average)
 * and carries about 30 regions through each, 26 of which still hold the buffer at the end:
 * the gaps that fit are that many whatever the order of the sets, so the cost is sets x
 * regions, and the same at 2k buffers (3 us a placement, 9 regions). Tried without a
 * measurable change: leaping over the regions before the first one a set meets (galloping
 * both ways), cutting by the shortest sets first, and asking for an insertion's sets before
 * adding to them. Going much faster needs a structure that finds the best-fitting gap
 * without listing every gap that fits. On sparse instances (random, 47 alive) the sets cost
 * 250 ms at 62k where the decoder takes 75 ms: the fixed cost of touching 60 sets a
 * placement.
 * Later measures (balanced 62k, seed 1): the work is compute, not memory. Asking every query
 * twice in a row (the second finds its sets in cache) costs 1.5 s where once costs 1.0-1.1 s,
 * so a query from cache still takes three quarters of its time. Per query: 21 non-empty cuts
 * (6 empty) of 26 intervals against 33 regions, 19 gaps fitting at the end, about 1,200 steps
 * of the walk; per placement, 33 insertions. Steps per query grow from 260 at 2k buffers to
 * 1,240 at 62k at 12-19 ns each (the whole run over the steps), so the run grows faster
 * than n log n. Tried, none faster (interleaved runs, load 3-4, the same plans on 6,336
 * cases): the cut as one merge whose skip-or-keep steps do not branch (sentinel-ended sets;
 * 0-17 % slower) or as a plain linear merge over sentinel-ended sets (5-11 % slower); the
 * sets' blocks from one pool with free lists per size (malloc is 8 % of a profile; within
 * noise); and filling only the sets some query reads, known at init from the windows (8 %
 * fewer insertions; 10-13 % faster on random, no change on perfect and balanced).
 * Of the 27 sets a query reads there, 20 are whole[] on the two boundary paths and 6.5 are
 * canonical under[] (counted over every buffer's window, 28,913 moments): the path sets,
 * which hold the buffers alive at the window's two ends, are the cost. A tree split where the
 * most windows end (within the middle half of each node) instead of at the middle reads 23.8
 * instead of 26.7 (perfect: 18.0 instead of 19.9). Keeping each moment's occupancy in blocks
 * of moments (2 sets per end) would read about 10 but insert into some 85 sets where it now
 * inserts into 33 (estimated from the window lengths, not built).
 * Counted per set read (62k, seed 1, greedy by size; "steps" = regions carried + intervals
 * of the set, summed over a query's cuts): balanced reads 1,240 steps a query, 770 of them in
 * the path sets (levels 1-6 alone: 290 steps, though only 11-33 % of those cuts change any
 * region) and 470 in the canonical under[] (levels 6-9 carry 80-115 regions, which the path
 * sets then cut down to 23); perfect reads 660, some 40 regions carried through 14 path sets
 * whose cuts change the regions 50-98 % of the time. Profile (perf, balanced): the cuts 49 %,
 * set_add 18 %, malloc and its page faults 15 %, the query's set-up 6 %. Tried without a
 * gain (each giving the same offsets, by hash, on perfect and balanced 62k): every order of
 * the sets by level or by length (553-1,513 steps a query against 664 and 1,238; time within
 * noise), and insertion by appending, the pending intervals sorted and merged in when the
 * set is next read (slower: 551 ms against 506 on perfect, 917 against 801 on balanced),
 * and, for a set of under a half or a quarter as many intervals as regions, a cut walking the
 * intervals and copying the regions between them as they are (within noise). A
 * cache of each node's ancestors' whole[] union would make the path sets two, but an
 * insertion invalidates every node below its canonical nodes: kept up lazily, an interval is
 * pushed into about as many nodes as its lifetime has moments (some 30M pushes at 62k), the
 * per-moment occupancy again. Stopping at an exact fit does not pay either: the best gap is
 * exact in 34 % of placements on perfect (13 % on balanced), but it lies mid-way through the
 * 37 (19) gaps left at the end, and every gap below it must still be cut by every set. The
 * regions carried are the gaps that fit, more of them the more buffers are alive at once, so
 * a placement costs more as n grows (3 us at 2k, 14 us on balanced 62k) and no reordering of
 * this structure reaches 0.2 s at 62k.
 *
 * The gaps of the union are exactly those of the sorted scan (plan_greedy.c's decoder): the
 * plans are identical, to the byte. The sets only grow (no removal): the local search, which
 * takes buffers out and puts them back, keeps the decoder. */
#include "plan/plan_internal.h"

#include <stdlib.h>
#include <string.h>

/* Placements' gathered intervals between clock reads. */
#define FIT_CLOCK_WORK 65536
/* First capacity of a node's set. */
#define FIT_FIRST_CAPACITY 4

static void set_free(clrun__plan_span_set *s)
{
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* Adds [lo, hi) to the set, merging every interval it meets or touches; false on no memory. */
static bool set_add(clrun__plan_span_set *s, uint64_t lo, uint64_t hi)
{
    /* i: the first interval ending at or after lo (it meets or touches [lo, hi) if it starts
     * at or before hi); j: the first one starting after hi. [i, j) merge with [lo, hi). */
    uint32_t a = 0, b = s->len;
    while (a < b) {
        uint32_t mid = a + (b - a) / 2;
        if (s->v[mid].hi < lo)
            a = mid + 1;
        else
            b = mid;
    }
    uint32_t i = a, j = i;
    while (j < s->len && s->v[j].lo <= hi)
        j++;
    if (i < j) {
        if (s->v[i].lo < lo)
            lo = s->v[i].lo;
        if (s->v[j - 1].hi > hi)
            hi = s->v[j - 1].hi;
        s->v[i] = (clrun__plan_span){lo, hi};
        if (j > i + 1) {
            memmove(s->v + i + 1, s->v + j, (s->len - j) * sizeof *s->v);
            s->len -= j - i - 1;
        }
        return true;
    }
    if (s->len == s->cap) {
        uint32_t cap = s->cap ? 2 * s->cap : FIT_FIRST_CAPACITY;
        clrun__plan_span *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return false;
        s->v = v;
        s->cap = cap;
    }
    memmove(s->v + i + 1, s->v + i, (s->len - i) * sizeof *s->v);
    s->v[i] = (clrun__plan_span){lo, hi};
    s->len++;
    return true;
}

clrun_status clrun__plan_fit_init(clrun__plan_fit *f, const clrun_plan_buffer *buffers, size_t n,
                                  uint64_t align)
{
    memset(f, 0, sizeof *f);
    f->buffers = buffers;
    f->n = n;
    f->align = align;
    size_t m = n ? n : 1, distinct = 0;
    f->from = malloc(m * sizeof *f->from);
    f->to = malloc(m * sizeof *f->to);
    clrun_status st = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (f->from && f->to)
        st = clrun__plan_compress_time(buffers, n, f->from, f->to, &distinct);
    if (st == CLRUN_OK) {
        f->leaves = 1;
        while (f->leaves < distinct)
            f->leaves *= 2;
        f->whole = calloc(2 * f->leaves, sizeof *f->whole);
        f->under = calloc(2 * f->leaves, sizeof *f->under);
        f->gather_cap = 64;
        f->gather = malloc(f->gather_cap * sizeof *f->gather);
        f->spare = malloc(f->gather_cap * sizeof *f->spare);
        if (!f->whole || !f->under || !f->gather || !f->spare)
            st = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    if (st != CLRUN_OK)
        clrun__plan_fit_free(f);
    return st;
}

void clrun__plan_fit_free(clrun__plan_fit *f)
{
    for (size_t i = 0; f->whole && i < 2 * f->leaves; i++)
        set_free(&f->whole[i]);
    for (size_t i = 0; f->under && i < 2 * f->leaves; i++)
        set_free(&f->under[i]);
    free(f->whole);
    free(f->under);
    free(f->from);
    free(f->to);
    free(f->gather);
    free(f->spare);
    memset(f, 0, sizeof *f);
}

void clrun__plan_fit_clear(clrun__plan_fit *f)
{
    for (size_t i = 0; i < 2 * f->leaves; i++)
        f->whole[i].len = f->under[i].len = 0;
}

/* Whether node `node`, `height` levels above the leaves, lies within moments [lo, hi). Such a
 * node on a boundary path is the canonical node or below it: a buffer stored there is also in
 * under[] of that canonical node, so neither insertions nor queries need its sets. */
static bool inside(const clrun__plan_fit *f, size_t node, unsigned height, size_t lo, size_t hi)
{
    size_t first = (node << height) - f->leaves;
    return first >= lo && first + ((size_t)1 << height) <= hi;
}

clrun_status clrun__plan_fit_insert(clrun__plan_fit *f, uint32_t b, uint64_t offset)
{
    uint64_t lo = offset, hi = offset + f->buffers[b].size;
    size_t l = f->from[b] + f->leaves, r = f->to[b] + f->leaves;
    bool ok = true;
    for (size_t a = l, c = r; a < c; a >>= 1, c >>= 1) {
        if (a & 1) {
            ok = ok && set_add(&f->whole[a], lo, hi) && set_add(&f->under[a], lo, hi);
            a++;
        }
        if (c & 1) {
            c--;
            ok = ok && set_add(&f->whole[c], lo, hi) && set_add(&f->under[c], lo, hi);
        }
    }
    /* the two boundary paths above the canonical nodes, once each above where they join */
    size_t from = f->from[b], to = f->to[b];
    unsigned h = 1;
    for (size_t a = l >> 1, c = (r - 1) >> 1; a >= 1 && ok; a >>= 1, c >>= 1, h++) {
        if (!inside(f, a, h, from, to))
            ok = set_add(&f->under[a], lo, hi);
        if (ok && c != a && !inside(f, c, h, from, to))
            ok = set_add(&f->under[c], lo, hi);
    }
    return ok ? CLRUN_OK : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
}

/* Makes room for `need` regions in both f->gather and f->spare; false on no memory. */
static bool reserve(clrun__plan_fit *f, size_t need)
{
    if (need <= f->gather_cap)
        return true;
    size_t cap = 2 * need;
    clrun__plan_span *g = realloc(f->gather, cap * sizeof *g);
    if (g)
        f->gather = g;
    clrun__plan_span *p = g ? realloc(f->spare, cap * sizeof *p) : NULL;
    if (p)
        f->spare = p;
    if (!g || !p)
        return false;
    f->gather_cap = cap;
    return true;
}

/* Cuts the set's intervals out of the candidate regions f->gather[0..*count): what is left of
 * each that could still hold `size` bytes (aligned) goes to f->spare, in offset order, and the
 * two swap; the last region is unbounded (hi UINT64_MAX) and always stays. A region too small
 * now stays too small, so only the few gaps a buffer fits are followed, whatever the number of
 * intervals. Regions and intervals are walked together; the walk gallops over intervals only
 * where a run of them lies between two regions. False on no memory. */
static bool cut(clrun__plan_fit *f, const clrun__plan_span_set *s, uint64_t size, size_t *count)
{
    uint32_t len = s->len;
    if (len == 0)
        return true;
    /* each interval splits at most one region in two */
    if (!reserve(f, *count + len + 1))
        return false;
    const clrun__plan_span *in = f->gather, *v = s->v;
    clrun__plan_span *out = f->spare;
    uint64_t mask = f->align - 1;
    size_t kept = 0, regions = *count;
    uint32_t i = 0; /* no interval before v[i] ends after the current region's lo */
    for (size_t r = 0; r < regions; r++) {
        uint64_t lo = in[r].lo, hi = in[r].hi;
        if (v[i].hi <= lo) {
            /* the first interval ending after lo: galloping, then a binary search */
            uint32_t a = i + 1, step = 1;
            while (a + step < len && v[a + step - 1].hi <= lo) {
                a += step;
                step *= 2;
            }
            uint32_t b = a + step < len ? a + step : len;
            while (a < b) {
                uint32_t mid = a + (b - a) / 2;
                if (v[mid].hi <= lo)
                    a = mid + 1;
                else
                    b = mid;
            }
            if (a == len) {
                /* every interval lies below: this region and the rest stay whole */
                memcpy(out + kept, in + r, (regions - r) * sizeof *out);
                kept += regions - r;
                break;
            }
            i = a;
        }
        /* v[i] ends after lo; cut it and those after it that start below hi */
        while (v[i].lo < hi) {
            if (v[i].lo > lo && ((lo + mask) & ~mask) + size <= v[i].lo)
                out[kept++] = (clrun__plan_span){lo, v[i].lo};
            lo = v[i].hi;
            if (lo >= hi || i + 1 == len)
                break; /* v[i] may reach into the next region: keep it */
            i++;
        }
        if (lo < hi && (hi == UINT64_MAX || ((lo + mask) & ~mask) + size <= hi))
            out[kept++] = (clrun__plan_span){lo, hi};
    }
    f->spare = f->gather;
    f->gather = out;
    *count = kept;
    f->work += kept + len / 16 + 1;
    return true;
}

clrun_status clrun__plan_fit_offset(clrun__plan_fit *f, uint32_t b, uint64_t *offset)
{
    uint64_t size = f->buffers[b].size;
    size_t l = f->from[b] + f->leaves, r = f->to[b] + f->leaves, count = 1, sets = 0;
    f->gather[0] = (clrun__plan_span){0, UINT64_MAX};
    /* The sets to cut by: under[] of the canonical nodes, from the lowest up, then whole[] on
     * the boundary paths (leaves included) where they reach past [from, to), from the root down.
     * The order only changes the work, not the answer; this one measured best on packings and
     * on graphs whose buffers all live until one join (where reading the root's sets first
     * carries thousands of regions through every other set: 30x slower at 20k buffers). */
    const clrun__plan_span_set *by_level[4 * 64];
    size_t from = f->from[b], to = f->to[b];
    unsigned h = 0;
    for (size_t a = l, c = r - 1; a >= 1; a >>= 1, c >>= 1, h++) {
        if (!inside(f, a, h, from, to))
            by_level[sets++] = &f->whole[a];
        if (c != a && !inside(f, c, h, from, to))
            by_level[sets++] = &f->whole[c];
    }
    size_t paths = sets;
    for (size_t a = l, c = r; a < c; a >>= 1, c >>= 1) {
        if (a & 1)
            by_level[sets++] = &f->under[a++];
        if (c & 1)
            by_level[sets++] = &f->under[--c];
    }
    /* the sets lie all over memory, and each cut waits for the last: ask for them all first
     * (headers, then the intervals, up to 16 lines of each: the cuts walk most of them) */
    for (size_t k = 0; k < sets; k++)
        __builtin_prefetch(by_level[k]);
    for (size_t k = 0; k < sets; k++) {
        const clrun__plan_span_set *q = by_level[k];
        uint32_t upto = q->len < 64 ? q->len : 64; /* 4 intervals a line */
        for (uint32_t j = 0; j < upto; j += 4)
            __builtin_prefetch(q->v + j);
    }
    bool ok = true;
    for (size_t k = paths; k < sets && ok; k++)
        ok = cut(f, by_level[k], size, &count);
    for (size_t k = paths; k-- > 0 && ok;)
        ok = cut(f, by_level[k], size, &count);
    if (!ok)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    /* the gaps left all hold the buffer: the smallest, then the lowest; else the top */
    uint64_t best_offset = 0, best_waste = UINT64_MAX;
    for (size_t i = 0; i + 1 < count; i++) {
        uint64_t start = clrun__plan_align_up(f->gather[i].lo, f->align);
        uint64_t waste = f->gather[i].hi - start - size;
        if (waste < best_waste) {
            best_waste = waste;
            best_offset = start;
        }
    }
    *offset = best_waste != UINT64_MAX ? best_offset
                                       : clrun__plan_align_up(f->gather[count - 1].lo, f->align);
    return CLRUN_OK;
}

clrun_status clrun__plan_fit_run(clrun__plan_fit *f, const uint32_t *order, double deadline,
                                 uint64_t *offsets, uint64_t *peak)
{
    clrun__plan_fit_clear(f);
    f->work = 0;
    uint64_t top = 0;
    for (size_t i = 0; i < f->n; i++) {
        if (f->work >= FIT_CLOCK_WORK) {
            f->work = 0;
            if (clrun__plan_now() > deadline) {
                *peak = UINT64_MAX;
                return CLRUN_OK;
            }
        }
        uint32_t b = order[i];
        uint64_t at;
        clrun_status st = clrun__plan_fit_offset(f, b, &at);
        if (st == CLRUN_OK)
            st = clrun__plan_fit_insert(f, b, at);
        if (st != CLRUN_OK)
            return st;
        offsets[b] = at;
        if (at + f->buffers[b].size > top)
            top = at + f->buffers[b].size;
    }
    *peak = top;
    return CLRUN_OK;
}
