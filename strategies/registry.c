/* clrun strategies: the table of shipped strategies, looked up by the name CLRUN_ALLOCATOR gives.
 * A linear scan of a few entries; add a strategy by adding it here and to local.mk. */
#include <clrun/strategy.h>

#include <stddef.h>
#include <string.h>

/* Every shipped strategy, in the order clrun_strategy_names() lists them. */
static const clrun_allocator_ops *const strategies[] = {
    &clrun_strategy_buddy,
    &clrun_strategy_slab,
    &clrun_strategy_bump,
    &clrun_strategy_tlsf,
};

const clrun_allocator_ops *clrun_strategy_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < sizeof strategies / sizeof strategies[0]; i++)
        if (strcmp(strategies[i]->name, name) == 0)
            return strategies[i];
    return NULL;
}

const clrun_allocator_ops *clrun_strategy_at(size_t i)
{
    return i < sizeof strategies / sizeof strategies[0] ? strategies[i] : NULL;
}

const char *clrun_strategy_names(void)
{
    return "buddy|slab|bump|tlsf";
}
