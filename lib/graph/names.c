/* Tensor names: what a name may be, and the open-addressing index from names to entries. */
#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

bool clrun__name_valid(const char *name)
{
    size_t length = strlen(name);
    if (length == 0 || length > CLRUN__GRAPH_NAME_MAX)
        return false;
    if (!(name[0] == '_' || (name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z')))
        return false;
    for (size_t i = 1; i < length; i++)
        if (!clrun__name_char(name[i]))
            return false;
    return true;
}

/* ---- the name index ---- */

/* FNV-1a: short names, a handful of collisions at most. */
static uint32_t name_hash(const char *name)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

int32_t clrun__name_index_find(const clrun__name_index *index, const char *name,
                               clrun__name_of name_of, const void *owner)
{
    if (index->capacity == 0)
        return -1;
    uint32_t mask = index->capacity - 1;
    for (uint32_t slot = name_hash(name) & mask;; slot = (slot + 1) & mask) {
        int32_t entry = index->slots[slot];
        if (entry < 0)
            return -1;
        if (strcmp(name_of(owner, entry), name) == 0)
            return entry;
    }
}

static void name_index_put(clrun__name_index *index, const char *name, int32_t entry)
{
    uint32_t mask = index->capacity - 1;
    uint32_t slot = name_hash(name) & mask;
    while (index->slots[slot] >= 0)
        slot = (slot + 1) & mask;
    index->slots[slot] = entry;
    index->count++;
}

clrun_status clrun__name_index_reserve(clrun__name_index *index, int32_t entries,
                                       clrun__name_of name_of, const void *owner)
{
    /* Kept at most half full, so a probe ends quickly at an empty slot. */
    uint64_t needed = (uint64_t)(entries < 0 ? 0 : entries) * 2;
    if (needed < index->capacity)
        return CLRUN_OK;
    uint32_t capacity = index->capacity ? index->capacity : 16;
    while (capacity <= needed) {
        if (capacity >= (UINT32_C(1) << 30)) /* 2^29 names: far beyond any graph */
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        capacity *= 2;
    }
    int32_t *slots = malloc(capacity * sizeof *slots);
    if (!slots)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    for (uint32_t i = 0; i < capacity; i++)
        slots[i] = -1;
    clrun__name_index grown = {slots, capacity, 0};
    for (uint32_t i = 0; i < index->capacity; i++)
        if (index->slots[i] >= 0)
            name_index_put(&grown, name_of(owner, index->slots[i]), index->slots[i]);
    free(index->slots);
    *index = grown;
    return CLRUN_OK;
}

void clrun__name_index_add(clrun__name_index *index, const char *name, int32_t entry)
{
    name_index_put(index, name, entry);
}

void clrun__name_index_free(clrun__name_index *index)
{
    free(index->slots);
    *index = (clrun__name_index){NULL, 0, 0};
}
