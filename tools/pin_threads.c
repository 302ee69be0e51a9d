/* CLRUN_PIN_THREADS: see pin_threads.h. POCL's CPU device runs kernels on a pool of worker
 * threads that sleep between kernels and are woken together for each one; unpinned, Linux often
 * wakes the second next to the first, on one core, and a model of many small kernels then runs
 * at about one core's speed, by turns (MobileNetV3-small 2.2-2.3 ms a run, pinned 1.8-1.9;
 * ResNet-18 19.4-21.8 against 19.4-20.3, and under a process spinning on one core 30-35
 * against 26). POCL pins its threads itself when POCL_AFFINITY is set, thread i to CPU i,
 * which fails where the process may not run on CPU i: so only where it may run on every CPU.
 * The library does not do this (it sets no environment of its applications): the command line
 * does, as its first act. */
#define _GNU_SOURCE
#include "pin_threads.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

bool clrun_cli_parse_pin(const char *text, bool *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(text, yes[i]) == 0) {
            *out = true;
            return true;
        }
        if (strcasecmp(text, no[i]) == 0) {
            *out = false;
            return true;
        }
    }
    return false;
}

bool clrun_cli_every_cpu(void)
{
    long configured = sysconf(_SC_NPROCESSORS_CONF), online = sysconf(_SC_NPROCESSORS_ONLN);
    if (configured < 1 || configured != online || configured > CPU_SETSIZE)
        return false;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) != (int)configured)
        return false;
    for (long cpu = 0; cpu < configured; cpu++)
        if (!CPU_ISSET((int)cpu, &set))
            return false;
    return true;
}

int clrun_cli_pin_threads(char *problem, size_t size)
{
    const char *text = getenv("CLRUN_PIN_THREADS");
    bool pin = true;
    if (text != NULL && !clrun_cli_parse_pin(text, &pin)) {
        snprintf(problem, size, "CLRUN_PIN_THREADS takes 1 or 0 (true, false, yes, no, on, off), not '%s'", text);
        return -1;
    }
    if (!pin || getenv("POCL_AFFINITY") != NULL || !clrun_cli_every_cpu())
        return 0;
    const char *count = getenv("POCL_MAX_PTHREAD_COUNT");
    if (count != NULL) {
        char *end;
        errno = 0;
        long threads = strtol(count, &end, 10);
        if (end == count || *end || errno || threads < 1 || threads > sysconf(_SC_NPROCESSORS_ONLN))
            return 0;
    }
    (void)setenv("POCL_AFFINITY", "1", 0); /* a failure leaves the threads as they were */
    return 0;
}
