/* Every CLRUN_* environment variable, read in one place from one table (lib/core/options.c). */
#ifndef CLRUN_LIB_OPTIONS_H
#define CLRUN_LIB_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <clrun/log.h>
#include <clrun/status.h>
#include <clrun/strategy.h>

#define CLRUN__NAME_MAX 256
#define CLRUN__PATH_MAX 4096

/* What CLRUN_ALLOCATOR (or the context option) names: a pool strategy, or an executor mode that
 * keeps the default strategy for inputs and constants. */
typedef enum clrun__exec_choice {
    CLRUN__EXEC_POOLED = 0, /* the values of clrun_exec_mode (exec.h checks they agree) */
    CLRUN__EXEC_NAIVE = 1,
    CLRUN__EXEC_PLANNED = 2,
} clrun__exec_choice;

typedef struct clrun__allocator_choice {
    const clrun_strategy_ops *strategy; /* the pool's strategy */
    clrun__exec_choice mode;             /* the executor mode when none is asked for */
} clrun__allocator_choice;

/* Parses a strategy name (clrun_strategy_names()) or "naive" or "planned", in any case. */
bool clrun__allocator_choice_parse(const char *text, clrun__allocator_choice *out);

/* The name of a choice: its strategy's for pooled, else "naive" or "planned". */
const char *clrun__allocator_choice_name(const clrun__allocator_choice *choice);

/* Every accepted name, '|'-separated, from the strategy registry: "buddy|slab|bump|naive|planned". */
const char *clrun__allocator_choice_names(void);

/* CLRUN_CACHE: on, off, or auto (the default): on, except that where the driver keeps compiled
 * kernels itself and asking it for a binary costs a compile of every kernel (POCL) a binary is
 * written only when its program is built from source a second time (lib/device/program.c). */
typedef struct clrun__cache_mode {
    bool enabled; /* read (and write) the cache */
    bool always;  /* write binaries on every driver (CLRUN_CACHE=1) */
} clrun__cache_mode;

/* The values of all options, defaults filled in. */
typedef struct clrun__options {
    char platform[CLRUN__NAME_MAX];  /* CLRUN_PLATFORM: index or name substring; "" = default */
    char device[CLRUN__NAME_MAX];    /* CLRUN_DEVICE: index or name substring; "" = default */
    clrun_log_level log_level;       /* CLRUN_LOG */
    clrun__cache_mode cache;         /* CLRUN_CACHE */
    char cache_dir[CLRUN__PATH_MAX]; /* CLRUN_CACHE_DIR; "" = $XDG_CACHE_HOME/clrun */
    double cache_budget;             /* CLRUN_CACHE_BUDGET: seconds a process spends writing
                                        binaries on POCL (lib/device/program.c), >= 0 */
    clrun__allocator_choice allocator; /* CLRUN_ALLOCATOR */
    bool preallocate;                /* CLRUN_PREALLOCATE */
    double mem_fraction;             /* CLRUN_MEM_FRACTION, in (0, 1] */
    uint64_t pool_limit;             /* CLRUN_POOL_LIMIT in bytes; 0 = none */
    bool guard;                      /* CLRUN_DEBUG=guard */
    bool out_of_order;               /* CLRUN_QUEUE=out-of-order */
    bool tune;                       /* CLRUN_TUNE: time kernel variants once per shape */
    bool fusion;                     /* CLRUN_FUSION */
    bool fold;                       /* CLRUN_FOLD */
    double offload_rate;             /* CLRUN_OFFLOAD_RATE: FLOPs per byte moved, >= 0; -1: auto */
    bool offload_overlap;            /* CLRUN_OFFLOAD_OVERLAP: offload copies on a second queue */
    double scan_unroll;              /* CLRUN_SCAN_UNROLL: body nodes a Scan unrolls to, at most */
} clrun__options;

/* One row per variable, for README-style listings (`clrun info --env`). */
typedef struct clrun__option_doc {
    const char *name;     /* "CLRUN_ALLOCATOR" */
    const char *accepted; /* "in-order|out-of-order" */
    const char *fallback; /* the default, as text */
    const char *help;     /* one line */
} clrun__option_doc;

/* Reads every variable from the environment. On an invalid value: CLRUN_ERROR_INVALID_OPTION
 * and a message naming the variable and what it accepts in err. */
clrun_status clrun__options_load(clrun__options *out, char *err, size_t errlen);

/* Number of documented variables and the i-th of them. */
size_t clrun__options_count(void);
const clrun__option_doc *clrun__options_doc(size_t i);

/* Parsers shared with the CLI: booleans (1/0/true/false/yes/no/on/off, any case) and sizes
 * (bytes with an optional K/M/G/T suffix, binary multiples, optional trailing B or iB). */
bool clrun__parse_bool(const char *text, bool *out);
bool clrun__parse_size(const char *text, uint64_t *out);

/* CLRUN_LOG alone, for the logger's first use (an invalid value gives CLRUN_LOG_NONE here; it
 * is reported as an error when a context reads all options). */
clrun_log_level clrun__options_env_log_level(void);
#endif
