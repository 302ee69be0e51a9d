/* clrun strategies: the page-run allocator beneath slab (see page_runs.h). */
#include "page_runs.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "chunk_index.h"

/* ---- run nodes ------------------------------------------------------------------------------ */

/* A node without a bitmap, or NULL when host memory runs out. */
run *clrun__runs_node(page_runs *s)
{
    run *r = s->spare;
    if (r) {
        s->spare = r->next;
        s->nspare--;
    } else {
        r = malloc(sizeof *r);
        if (!r)
            return NULL;
    }
    memset(r, 0, sizeof *r);
    return r;
}

void clrun__runs_node_drop(page_runs *s, run *r)
{
    if (r->nwords == 0 && s->nspare < SLAB_SPARE_MAX) {
        r->next = s->spare;
        s->spare = r;
        s->nspare++;
    } else {
        free(r);
    }
}

/* ---- free runs ------------------------------------------------------------------------------ */

static void bin_insert(page_runs *s, run *r)
{
    unsigned b = log2_floor_u64(r->pages);
    r->prev = NULL;
    r->next = s->bins[b];
    if (r->next)
        r->next->prev = r;
    s->bins[b] = r;
    s->bin_mask |= UINT64_C(1) << b;
}

void clrun__runs_unlink_free(page_runs *s, run *r)
{
    unsigned b = log2_floor_u64(r->pages);
    if (r->prev)
        r->prev->next = r->next;
    else
        s->bins[b] = r->next;
    if (r->next)
        r->next->prev = r->prev;
    if (!s->bins[b])
        s->bin_mask &= ~(UINT64_C(1) << b);
}

/* Records r as free over [first, first + pages): boundary tags and its size list. */
void clrun__runs_set_free(page_runs *s, run *r, uint64_t first, uint64_t pages)
{
    assert(pages > 0 && first + pages <= r->chunk->pages);
    r->kind = RUN_FREE;
    r->first = first;
    r->pages = pages;
    r->chunk->map[first] = r;
    r->chunk->map[first + pages - 1] = r;
    bin_insert(s, r);
}

/* Where a block of `pages` pages aligned to `align` pages would start in free run r; false if
 * it does not fit. */
static bool run_fits(const run *r, uint64_t pages, uint64_t align, uint64_t *start)
{
    uint64_t at = round_up_u64(r->first, align);
    if (at < r->first) /* overflow */
        return false;
    uint64_t end = r->first + r->pages;
    if (at > end || pages > end - at)
        return false;
    *start = at;
    return true;
}

/* The first free run that holds `pages` pages aligned to `align` pages, or NULL. */
run *clrun__runs_find(const page_runs *s, uint64_t pages, uint64_t align, uint64_t *start)
{
    uint64_t mask = s->bin_mask & (~UINT64_C(0) << log2_floor_u64(pages));
    while (mask) {
        unsigned b = (unsigned)__builtin_ctzll(mask);
        for (run *r = s->bins[b]; r; r = r->next)
            if (run_fits(r, pages, align, start))
                return r;
        mask &= mask - 1;
    }
    return NULL;
}

/* Cuts [start, start + pages) out of free run r and gives it to `to` (which gets chunk, first
 * and pages); what is left of r on either side stays free. r itself and `extra` (a plain node)
 * become those leftovers; whichever is not needed is recycled. */
void clrun__runs_carve(page_runs *s, run *r, uint64_t start, uint64_t pages, run *to,
                           run *extra)
{
    slab_chunk *c = r->chunk;
    uint64_t first = r->first, end = r->first + r->pages, back = start + pages;
    assert(r->kind == RUN_FREE && start >= first && back <= end && extra && extra->nwords == 0);
    run *nodes[2] = {r, extra};
    unsigned used = 0;
    clrun__runs_unlink_free(s, r);
    c->map[first] = NULL;
    c->map[end - 1] = NULL;
    if (start > first)
        clrun__runs_set_free(s, nodes[used++], first, start - first);
    if (end > back) {
        nodes[used]->chunk = c;
        clrun__runs_set_free(s, nodes[used++], back, end - back);
    }
    while (used < 2)
        clrun__runs_node_drop(s, nodes[used++]);
    to->chunk = c;
    to->first = start;
    to->pages = pages;
}

/* Returns the pages of run r (a large block or an empty slab) to the free runs, merging with
 * free neighbours. Reuses r as the free run's node, so it never needs host memory. */
void clrun__runs_release(page_runs *s, run *r)
{
    assert(r->kind == RUN_LARGE || r->kind == RUN_SLAB || r->kind == RUN_HELD);
    slab_chunk *c = r->chunk;
    uint64_t first = r->first, end = r->first + r->pages;
    if (r->kind == RUN_SLAB) {
        for (uint64_t p = first; p < end; p++)
            c->map[p] = NULL;
    } else {
        c->map[first] = NULL;
        c->map[end - 1] = NULL;
    }
    if (first > 0 && c->map[first - 1] && c->map[first - 1]->kind == RUN_FREE) {
        run *left = c->map[first - 1];
        clrun__runs_unlink_free(s, left);
        c->map[left->first] = NULL;
        c->map[first - 1] = NULL;
        first = left->first;
        clrun__runs_node_drop(s, left);
    }
    if (end < c->pages && c->map[end] && c->map[end]->kind == RUN_FREE) {
        run *right = c->map[end];
        uint64_t right_end = right->first + right->pages;
        clrun__runs_unlink_free(s, right);
        c->map[end] = NULL;
        c->map[right_end - 1] = NULL;
        end = right_end;
        clrun__runs_node_drop(s, right);
    }
    r->in_partial = false;
    clrun__runs_set_free(s, r, first, end - first);
}

/* ---- held-back runs ------------------------------------------------------------------------- */

void clrun__runs_held_unlink(page_runs *s, run *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        s->held = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->chunk->held = NULL;
}

/* Holds back large run r, just freed, unmerged; the run its chunk held before is merged. */
void clrun__runs_hold(page_runs *s, run *r)
{
    assert(r->kind == RUN_LARGE);
    slab_chunk *c = r->chunk;
    if (c->held) {
        run *old = c->held;
        clrun__runs_held_unlink(s, old);
        clrun__runs_release(s, old);
    }
    r->kind = RUN_HELD;
    r->prev = NULL;
    r->next = s->held;
    if (r->next)
        r->next->prev = r;
    s->held = r;
    c->held = r;
}

/* Merges the held-back runs (of chunk `only`, or of all chunks when NULL); true when there was
 * one. */
bool clrun__runs_release_held(page_runs *s, const slab_chunk *only)
{
    bool any = false;
    for (run *r = s->held, *next; r; r = next) {
        next = r->next;
        if (!only || r->chunk == only) {
            clrun__runs_held_unlink(s, r);
            clrun__runs_release(s, r);
            any = true;
        }
    }
    return any;
}

/* Pages of held run r once merged with its free neighbours, as clrun__runs_release would make it. */
uint64_t clrun__runs_held_merged_pages(const run *r)
{
    const slab_chunk *c = r->chunk;
    uint64_t pages = r->pages, end = r->first + r->pages;
    if (r->first > 0 && c->map[r->first - 1] && c->map[r->first - 1]->kind == RUN_FREE)
        pages += c->map[r->first - 1]->pages;
    if (end < c->pages && c->map[end] && c->map[end]->kind == RUN_FREE)
        pages += c->map[end]->pages;
    return pages;
}

