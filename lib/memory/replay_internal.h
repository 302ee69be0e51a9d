/* What the parts of the trace replay share (lib/memory/replay*.c): the trace in replay order
 * and the two baselines, PyOpenCL's binned pool and the best-fit reference. No OpenCL here. */
#ifndef CLRUN_LIB_MEMORY_REPLAY_INTERNAL_H
#define CLRUN_LIB_MEMORY_REPLAY_INTERNAL_H

#include <stddef.h>

#include <clrun/replay.h>

/* One allocation or free of the trace. */
typedef struct clrun__replay_event {
    uint64_t time; /* the moment */
    uint32_t row;  /* index of the buffer in the trace */
    bool alloc;    /* false: free */
} clrun__replay_event;

/* A trace ready to replay. */
typedef struct clrun__replay_trace {
    const clrun_lifetime *rows;   /* as given: ids and moments, for messages */
    uint64_t *sizes;              /* per row, scaled (options.scale_to) */
    size_t count;                 /* rows */
    clrun__replay_event *events;  /* 2 per row, in replay order */
    size_t event_count;
    uint64_t lower_bound;         /* largest total of sizes live at once */
} clrun__replay_trace;

/* Repeat a timed pass for at least this long, at most this often. */
#define CLRUN__REPLAY_TIMED_NS_MIN 20000000.0
#define CLRUN__REPLAY_TIMED_PASSES_MAX 50

/* clrun_replay, with the growth rule of before issue 12 when `previous_growth` (bench_replay
 * compares the two in one run). */
clrun_status clrun__replay_run(const clrun_lifetime *rows, size_t count, const char *allocator,
                               const clrun_replay_options *options, bool previous_growth,
                               clrun_replay_result *out, char *err, size_t errlen);

/* PyOpenCL's MemoryPool over the trace, each block its own buffer on a device whose buffers
 * start at multiples of `alignment` (replay_binned.c). */
clrun_status clrun__replay_binned(const clrun__replay_trace *t, uint64_t alignment, bool timed,
                                  clrun_replay_result *out, char *err, size_t errlen);

/* Coalescing best fit in one unbounded arena, offsets a multiple of `alignment`
 * (replay_best_fit.c). */
clrun_status clrun__replay_best_fit(const clrun__replay_trace *t, uint64_t alignment,
                                    clrun_replay_result *out, char *err, size_t errlen);

#endif
