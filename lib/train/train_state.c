/* Train state files: the parameters and optimizer state of a trainer, with the steps done and the
 * optimizer, so that a run resumed from one continues bit for bit.
 *
 * Layout (integers little-endian): "CLRUNTS1", u64 steps, u32 optimizer kind, u32 tensors; per
 * tensor (parameters and state in the step's input order): u32 name length, the name (its
 * identifier in the step graph), u32 dtype, u32 rank, u64 dims[rank], u64 bytes, the bytes; then
 * u64 FNV-1a of everything before it. Loading reads and checks the whole file before it changes
 * anything. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"
#include "device/context.h"
#include "graph/types.h"
#include "train/train_internal.h"

static const char magic[8] = {'C', 'L', 'R', 'U', 'N', 'T', 'S', '1'};

typedef struct sink {
    unsigned char *data;
    size_t size, capacity;
    bool failed;
} sink;

static void put(sink *k, const void *bytes, size_t n)
{
    if (k->failed)
        return;
    if (k->size + n > k->capacity) {
        size_t cap = k->capacity ? k->capacity : 4096;
        while (cap < k->size + n)
            cap *= 2;
        unsigned char *grown = realloc(k->data, cap);
        if (grown == NULL) {
            k->failed = true;
            return;
        }
        k->data = grown;
        k->capacity = cap;
    }
    memcpy(k->data + k->size, bytes, n);
    k->size += n;
}

static void put_u64(sink *k, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    put(k, b, 8);
}

static void put_u32(sink *k, uint32_t v)
{
    unsigned char b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    put(k, b, 4);
}

static uint64_t fnv1a(const unsigned char *data, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ data[i]) * 0x100000001b3ull;
    return h;
}

static bool saved(const clrun__train_slot *slot)
{
    return slot->role == CLRUN__SLOT_PARAM || slot->role == CLRUN__SLOT_STATE;
}

clrun_status clrun_train_save(clrun_train *t, const char *path)
{
    if (t == NULL || path == NULL)
        return clrun__fail(t ? t->ctx : NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                           "clrun_train_save: NULL trainer or path");
    if (t->broken)
        return clrun__fail(t->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "train: nothing to save: step "
                           "%llu failed and its state is gone", (unsigned long long)t->broken_step);
    sink k = {0};
    uint32_t tensors = 0;
    for (int32_t i = 0; i < t->tg.slot_count; i++)
        tensors += saved(&t->tg.slots[i]);
    put(&k, magic, sizeof magic);
    put_u64(&k, t->steps);
    put_u32(&k, (uint32_t)t->options.graph.optimizer.kind);
    put_u32(&k, tensors);
    clrun_status s = CLRUN_OK;
    for (int32_t i = 0; i < t->tg.slot_count && s == CLRUN_OK; i++) {
        const clrun__train_slot *slot = &t->tg.slots[i];
        if (!saved(slot))
            continue;
        const char *name = clrun_graph_tensor_ident(t->tg.graph, slot->input);
        const clrun_tensor_type *type = clrun_graph_tensor_type(t->tg.graph, slot->input);
        uint64_t bytes = clrun__train_slot_bytes(t, i);
        put_u32(&k, (uint32_t)strlen(name));
        put(&k, name, strlen(name));
        put_u32(&k, (uint32_t)type->dtype);
        put_u32(&k, (uint32_t)type->rank);
        for (int d = 0; d < type->rank; d++)
            put_u64(&k, (uint64_t)type->shape[d]);
        put_u64(&k, bytes);
        if (k.failed)
            break;
        unsigned char *room = malloc((size_t)bytes);
        if (room == NULL) {
            k.failed = true;
            break;
        }
        s = clrun_buffer_read(t->ctx, &t->buffers[i], room);
        put(&k, room, (size_t)bytes);
        free(room);
    }
    if (s == CLRUN_OK && !k.failed)
        put_u64(&k, fnv1a(k.data, k.size));
    if (s == CLRUN_OK && k.failed)
        s = clrun__fail(t->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory "
                        "writing the state");
    if (s == CLRUN_OK) {
        /* Written beside the target and renamed over it: never a half-written state file. */
        size_t len = strlen(path);
        char *tmp = malloc(len + 8);
        FILE *f = tmp ? (snprintf(tmp, len + 8, "%s.part", path), fopen(tmp, "wb")) : NULL;
        bool ok = f && fwrite(k.data, 1, k.size, f) == k.size;
        if (f && fclose(f) != 0)
            ok = false;
        if (ok && rename(tmp, path) != 0)
            ok = false;
        if (!ok) {
            if (tmp)
                remove(tmp);
            s = clrun__fail(t->ctx, CLRUN_ERROR_IO, "%s: cannot write the train state", path);
        }
        free(tmp);
    }
    free(k.data);
    return s;
}

typedef struct source {
    const unsigned char *data;
    size_t size, at;
    bool short_read;
} source;

static const unsigned char *take(source *r, uint64_t n)
{
    if (r->short_read || n > r->size - r->at) {
        r->short_read = true;
        return NULL;
    }
    const unsigned char *p = r->data + r->at;
    r->at += (size_t)n;
    return p;
}

static uint64_t get_u64(source *r)
{
    const unsigned char *p = take(r, 8);
    uint64_t v = 0;
    for (int i = 0; p && i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint32_t get_u32(source *r)
{
    const unsigned char *p = take(r, 4);
    uint32_t v = 0;
    for (int i = 0; p && i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

clrun_status clrun_train_load(clrun_train *t, const char *path)
{
    if (t == NULL || path == NULL)
        return clrun__fail(t ? t->ctx : NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                           "clrun_train_load: NULL trainer or path");
    char why[512];
    clrun_status s = CLRUN_OK;
    size_t size = 0;
    uint64_t limit = 1ull << 40;
    unsigned char *data = clrun__file_read(path, limit, &size, &s, why, sizeof why);
    if (data == NULL)
        return clrun__fail(t->ctx, s, "%s: %s", path, why);
    source r = {.data = data, .size = size};
    const unsigned char **values = calloc((size_t)(t->tg.slot_count ? t->tg.slot_count : 1), sizeof *values);
    if (values == NULL) {
        free(data);
        return clrun__fail(t->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
    }
    const unsigned char *m = take(&r, sizeof magic);
    if (size < sizeof magic + 8 || m == NULL || memcmp(m, magic, sizeof magic) != 0 ||
        get_u64(&(source){.data = data + size - 8, .size = 8}) != fnv1a(data, size - 8)) {
        s = clrun__fail(t->ctx, CLRUN_ERROR_PARSE, "%s: not a clrun train state, or damaged "
                        "(its checksum does not match)", path);
        goto done;
    }
    r.size = size - 8;
    uint64_t steps = get_u64(&r);
    uint32_t kind = get_u32(&r), tensors = get_u32(&r);
    if (kind != (uint32_t)t->options.graph.optimizer.kind) {
        s = clrun__fail(t->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "%s: a state of optimizer %s, this "
                        "trainer's is %s", path, clrun_optimizer_kind_name((clrun_optimizer_kind)kind),
                        clrun_optimizer_kind_name(t->options.graph.optimizer.kind));
        goto done;
    }
    uint32_t expected = 0;
    for (int32_t i = 0; i < t->tg.slot_count; i++)
        expected += saved(&t->tg.slots[i]);
    if (tensors != expected) {
        s = clrun__fail(t->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "%s: holds %u tensors of state, "
                        "this trainer has %u: a state of another model or optimizer", path,
                        tensors, expected);
        goto done;
    }
    for (int32_t i = 0; i < t->tg.slot_count; i++) {
        const clrun__train_slot *slot = &t->tg.slots[i];
        if (!saved(slot))
            continue;
        const char *name = clrun_graph_tensor_ident(t->tg.graph, slot->input);
        const clrun_tensor_type *type = clrun_graph_tensor_type(t->tg.graph, slot->input);
        uint32_t len = get_u32(&r);
        const unsigned char *got = take(&r, len);
        uint32_t dtype = get_u32(&r), rank = get_u32(&r);
        bool same = got && len == strlen(name) && memcmp(got, name, len) == 0 &&
                    dtype == (uint32_t)type->dtype && rank == (uint32_t)type->rank;
        for (uint32_t d = 0; d < rank && d < CLRUN_MAX_DIMS && !r.short_read; d++)
            same = same && get_u64(&r) == (uint64_t)type->shape[d];
        uint64_t bytes = get_u64(&r);
        if (r.short_read) {
            s = clrun__fail(t->ctx, CLRUN_ERROR_PARSE, "%s: ends inside tensor %s", path, name);
            goto done;
        }
        if (!same || bytes != clrun__train_slot_bytes(t, i)) {
            char text[CLRUN__TYPE_TEXT];
            s = clrun__fail(t->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "%s: where this trainer has %s "
                            "%s, the state has %.*s: a state of another model", path, name,
                            clrun__type_format(type, text, sizeof text), got ? (int)(len > 200 ? 200 : len) : 6,
                            got ? (const char *)got : "(none)");
            goto done;
        }
        values[i] = take(&r, bytes);
        if (values[i] == NULL) {
            s = clrun__fail(t->ctx, CLRUN_ERROR_PARSE, "%s: ends inside tensor %s", path, name);
            goto done;
        }
    }
    if (r.at != r.size) {
        s = clrun__fail(t->ctx, CLRUN_ERROR_PARSE, "%s: %zu bytes after the last tensor", path,
                        r.size - r.at);
        goto done;
    }
    /* Everything checks: now the state changes. A trainer whose state a failed step consumed
     * gets new blocks. */
    for (int32_t i = 0; i < t->tg.slot_count && s == CLRUN_OK; i++) {
        if (values[i] == NULL)
            continue;
        if (!t->held[i]) {
            s = clrun_alloc(t->ctx, clrun__train_slot_bytes(t, i), &t->buffers[i]);
            t->held[i] = s == CLRUN_OK;
        }
        if (s == CLRUN_OK)
            s = clrun_buffer_write(t->ctx, &t->buffers[i], values[i]);
    }
    if (s == CLRUN_OK) {
        t->steps = steps;
        t->broken = false;
    }
done:
    free(values);
    free(data);
    return s;
}
