/* clrun strategies: the one table of shipped strategies. Every list of names (CLRUN_ALLOCATOR's
 * accepted values, help texts, messages) comes from it, so a new strategy is one file plus one
 * line here (and its line in strategies/local.mk). */
#include <clrun/strategy.h>

#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

/* Every shipped strategy, in the order clrun_strategy_names() lists them. */
static const clrun_strategy_ops *const strategies[] = {
    &clrun_strategy_buddy,
    &clrun_strategy_slab,
    &clrun_strategy_bump,
    &clrun_strategy_tlsf,
};

#define STRATEGY_COUNT (sizeof strategies / sizeof strategies[0])

size_t clrun_strategy_count(void) { return STRATEGY_COUNT; }

const clrun_strategy_ops *clrun_strategy_at(size_t i)
{
    return i < STRATEGY_COUNT ? strategies[i] : NULL;
}

/* The default, chosen by measurement (README, "Measured"): over the traces of tests/data/traces
 * and the planner's generated families at 1 MiB and 1 GiB scales, tlsf reserves the least of
 * the general-purpose strategies on every one and less than PyOpenCL's binned pool on every
 * one; over the model graphs it reserves the least or ties; its alloc+free costs about what
 * glibc malloc's does. */
const clrun_strategy_ops *clrun_strategy_default(void) { return &clrun_strategy_tlsf; }

const clrun_strategy_ops *clrun_strategy_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < STRATEGY_COUNT; i++)
        if (strcasecmp(strategies[i]->name, name) == 0)
            return strategies[i];
    return NULL;
}

static char names[256];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void join_names(void)
{
    size_t used = 0;
    for (size_t i = 0; i < STRATEGY_COUNT; i++) {
        size_t length = strlen(strategies[i]->name);
        if (used + length + 2 > sizeof names)
            break;
        if (i)
            names[used++] = '|';
        memcpy(names + used, strategies[i]->name, length);
        used += length;
    }
    names[used] = '\0';
}

const char *clrun_strategy_names(void)
{
    pthread_once(&names_once, join_names);
    return names;
}
