/* clrun: the decision search's state, shared by its tables (plan_decide_tables.c) and the
 * search itself (plan_decide.c). Private to those two files. */
#ifndef CLRUN_PLAN_DECIDE_H
#define CLRUN_PLAN_DECIDE_H

#include "plan/plan_internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NONE UINT64_MAX

/* A min tree over leaves 0..leaves-1 (unused leaves hold NONE). */
typedef struct min_tree {
    uint64_t *node; /* 2 * leaves; node[1] is the root */
    size_t leaves;  /* power of two */
} min_tree;

/* What a trail entry restores: a raised buffer's minimum offset and key (END: aux is 1 when the
 * key was NONE, else the key was a(b)), a candidate key alone (KEY), or a moment's floor with
 * its holders (FLOOR) or only the holders (HOLDERS). */
enum { TRAIL_END, TRAIL_KEY, TRAIL_FLOOR, TRAIL_HOLDERS };

struct trail_entry {
    uint32_t index; /* buffer or moment */
    uint32_t aux;   /* TRAIL_* in the top 2 bits, a moment's holders below */
    uint64_t value; /* the value before the change */
};
typedef struct trail_entry trail_entry;

#define TRAIL_KIND(e) ((e)->aux >> 30)
#define TRAIL_AUX(e) ((e)->aux & 0x3FFFFFFFu)

/* One node of the current path. */
struct frame {
    size_t trail_mark; /* trail length at entry: the node's own marks start there */
    size_t child_mark; /* trail length before the child's placement */
    uint64_t floor;    /* L at the node */
    uint32_t child;    /* the buffer placed below this node, or NO_CHILD */
    bool forced;       /* the child was hatless: no alternatives */
};
typedef struct frame frame;

struct clrun__plan_decide {
    /* the part, local indices 0..m-1 */
    size_t m;
    const uint32_t *member;       /* local -> instance index (the caller's array) */
    uint64_t align;
    uint64_t *size, *aligned;
    uint32_t *from, *to;          /* alive over moments [from, to) */
    size_t moments;
    uint64_t *pad;                /* per moment: largest padding of a buffer alive then */
    uint64_t *sum0;               /* per moment: aligned bytes alive, before any placement */
    uint32_t *count0;             /* per moment: buffers alive */
    uint32_t *ov_start, *ov;      /* buffers alive together with each buffer (CSR) */
    uint32_t *sec_start, *sec;    /* buffers alive at each moment (CSR) */
    uint32_t *rank[CLRUN__PLAN_RANKINGS];    /* buffer -> position in each static order */
    uint32_t *by_rank[CLRUN__PLAN_RANKINGS]; /* position -> buffer */

    /* the current run */
    uint64_t capacity;
    const uint32_t *cur_rank, *cur_by_rank;
    bool from_end;                /* the current order goes from the end of time */
    bool *placed;
    uint64_t *offset;
    uint64_t *end;                /* m(b): highest end of the placed buffers alive with b */
    uint64_t *sum;                /* per moment: aligned bytes of the unplaced alive then */
    uint32_t *count;              /* per moment: how many */
    uint64_t *floor_at;           /* per moment: lowest a(b) of those, NONE when none */
    uint32_t *holders;            /* per moment: how many of those have a(b) == floor_at */
    uint64_t *low;                /* per buffer: a(b), NONE once placed */
    min_tree key;                 /* by rank position: a(b) of candidates, NONE otherwise */
    min_tree dead;                /* by buffer: a(b) + size(b) of unplaced buffers */
    min_tree stack;               /* by moment: NONE - (sum - pad) where buffers remain */
    trail_entry *trail;
    size_t trail_len, trail_cap;
    frame *frames;                /* m + 1 */
    uint32_t *touched;            /* moments whose floor must be recomputed (each once) */
    bool floors;                  /* floor_at is kept (else only L is the floor) */
    double build_deadline;        /* building the tables gives up after it */
    size_t placed_count;
    uint64_t floor;               /* L */
};


static inline uint64_t clrun__decide_align_up(const clrun__plan_decide *d, uint64_t v)
{
    return clrun__plan_align_up(v, d->align);
}

/* Static order r breaks ties from the end of time (latest-ending first). */
bool clrun__plan_decide_from_end(int r);
/* Builds static order r (d->rank[r], d->by_rank[r]) on first use. */
clrun_status clrun__plan_decide_ranking(clrun__plan_decide *d, int r);
/* Allocates a min tree of at least `count` leaves. */
bool clrun__plan_decide_tree_alloc(min_tree *t, size_t count);

#endif
