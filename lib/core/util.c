/* Small utilities: see util.h. */
#define _DEFAULT_SOURCE /* madvise and MADV_HUGEPAGE beside _XOPEN_SOURCE (Linux) */
#include "core/util.h"

#include <clrun/options.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

/* Transparent huge pages come in 2 MiB on x86-64 and arm64 (4 KiB pages). */
#define HUGE_PAGE ((size_t)2 << 20)

void *clrun__alloc_filled_whole(size_t size)
{
    if (size < HUGE_PAGE)
        return malloc(size);
    void *block = NULL;
    if (posix_memalign(&block, HUGE_PAGE, size) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    /* Advice only: where the system refuses it (THP off, not Linux) the pages are small. */
    (void)madvise(block, size / HUGE_PAGE * HUGE_PAGE, MADV_HUGEPAGE);
#endif
    return block;
}

double clrun__now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

const char *clrun__format_bytes(uint64_t bytes, char *buf, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, size, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    double value = (double)bytes;
    size_t unit = 0;
    while (value >= 1024.0 && unit + 1 < sizeof units / sizeof units[0]) {
        value /= 1024.0;
        unit++;
    }
    snprintf(buf, size, "%.2f %s", value, units[unit]);
    return buf;
}

const char *clrun_format_bytes(uint64_t bytes, char *buf, size_t size)
{
    return buf && size ? clrun__format_bytes(bytes, buf, size) : buf;
}

bool clrun__grow(void **array, size_t *capacity, size_t needed, size_t size)
{
    if (needed <= *capacity)
        return true;
    size_t next = *capacity ? *capacity : 8;
    while (next < needed) {
        if (next > SIZE_MAX / 2)
            return false;
        next *= 2;
    }
    if (size && next > SIZE_MAX / size)
        return false;
    void *grown = realloc(*array, next * size);
    if (grown == NULL)
        return false;
    *array = grown;
    *capacity = next;
    return true;
}

clrun__c_numeric clrun__c_numeric_enter(void)
{
    clrun__c_numeric scope = {newlocale(LC_NUMERIC_MASK, "C", (locale_t)0), (locale_t)0};
    if (scope.c)
        scope.previous = uselocale(scope.c);
    return scope;
}

void clrun__c_numeric_leave(clrun__c_numeric scope)
{
    if (!scope.c)
        return;
    uselocale(scope.previous);
    freelocale(scope.c);
}
