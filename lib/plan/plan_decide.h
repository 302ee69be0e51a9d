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
 * key was NONE, else the key was a(b)), a candidate key alone (KEY; aux TRAIL_PARKED when the
 * buffer was set aside for a later group: its dead-tree entry comes back too; TRAIL_UNPARKED
 * when it was taken back: the dead-tree entry goes again), or a moment's floor with its holders
 * (FLOOR) or only the holders (HOLDERS). */
enum { TRAIL_END, TRAIL_KEY, TRAIL_FLOOR, TRAIL_HOLDERS };

struct trail_entry {
    uint32_t index; /* buffer or moment */
    uint32_t aux;   /* TRAIL_* in the top 2 bits, a moment's holders below */
    uint64_t value; /* the value before the change */
};
typedef struct trail_entry trail_entry;

#define TRAIL_KIND(e) ((e)->aux >> 30)
#define TRAIL_AUX(e) ((e)->aux & 0x3FFFFFFFu)
#define TRAIL_PARKED 1
#define TRAIL_UNPARKED 2

/* A group: the unplaced buffers of a stretch of moments that no unplaced buffer crosses the
 * edges of. Once a placement cuts the current group so, its pieces are independent: each is
 * searched on its own, one after the other, and the failure of any fails the placement that
 * cut them (no other arrangement of the pieces before it can help). */
struct group {
    uint32_t lo, hi;     /* moments [lo, hi) */
    uint32_t left;       /* its buffers not placed yet */
    uint32_t cut_depth;  /* the node whose child's placement made it (failing jumps there) */
    uint64_t floor;      /* L when it starts: the offset of that placement */
};
typedef struct group group;

#define NO_JUMP UINT32_MAX

/* One node of the current path. */
struct frame {
    size_t trail_mark; /* trail length at entry: the node's own marks start there */
    size_t child_mark; /* trail length before the child's placement */
    uint64_t floor;    /* L at the node */
    uint32_t child;    /* the buffer placed below this node, or NO_CHILD */
    bool forced;       /* the child was hatless: no alternatives */
    uint32_t jump;     /* a group's first node: failing fails the child of this node instead
                          of the parent's (NO_JUMP otherwise) */
    size_t group_count; /* groups before the child's placement */
    group top;          /* the current group then */
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
    uint32_t *shuffled_rank, *shuffled_by_rank; /* a perturbed order, for restarts */

    /* the current run */
    uint64_t capacity;
    const uint32_t *cur_rank, *cur_by_rank;
    bool from_end;                /* the current order goes from the end of time */
    bool fail_first;              /* candidates chosen by fail_first (plan_decide.c) */
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
    uint32_t *cuts0, *cuts;       /* per moment t: buffers alive at t and t + 1 (unplaced) */
    uint32_t *starts;             /* per moment t: unplaced buffers whose first moment is t */
    uint32_t *start_sums;         /* Fenwick tree over starts (T + 1 entries) */
    uint32_t *fresh;              /* the moments whose cuts[] the last placement brought to 0 */
    size_t fresh_count;
    group *groups;                /* pending groups, the current one on top */
    size_t group_count;
    uint64_t *parked;             /* per buffer: its key while set aside in a later group */
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
/* Fills d->shuffled_rank and d->shuffled_by_rank with static order `base` perturbed at random
 * for restart `run`. */
clrun_status clrun__plan_decide_shuffle(clrun__plan_decide *d, int base, uint64_t run);
/* Allocates a min tree of at least `count` leaves. */
bool clrun__plan_decide_tree_alloc(min_tree *t, size_t count);

#endif
