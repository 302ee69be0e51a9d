/* Shared set-up of tests that run on a real OpenCL device (POCL in CI). */
#ifndef CLRUN_TESTS_DEVICE_TEST_H
#define CLRUN_TESTS_DEVICE_TEST_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A fatal signal in a thread other than main() reaches cmocka's handler, which keeps the test's
 * message in that thread's buffer and exits with status 255 without printing it (CI saw one
 * such exit). clrun_test_device_environment keeps the handlers that were there before cmocka's
 * (AddressSanitizer's, which print the stack, or the default: a core and the signal's status),
 * and a test whose threads (its own or the library's) may fault puts them back first with
 * clrun_test_report_fatal_signals: cmocka sets its own before each test. */
#define CLRUN_TEST_FATAL_SIGNALS 4

static inline int clrun_test_fatal_signal(int i)
{
    static const int fatal[CLRUN_TEST_FATAL_SIGNALS] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
    return fatal[i];
}

static inline struct sigaction *clrun_test_handlers_before_cmocka(void)
{
    static struct sigaction before[CLRUN_TEST_FATAL_SIGNALS];
    return before;
}

static inline void clrun_test_report_fatal_signals(void)
{
    for (int i = 0; i < CLRUN_TEST_FATAL_SIGNALS; i++)
        sigaction(clrun_test_fatal_signal(i), &clrun_test_handlers_before_cmocka()[i], NULL);
}

/* POCL exposes two CPU devices with this, so selection by index and by name is testable; other
 * drivers ignore it. The binary cache goes to a fresh directory, never the user's; the signal
 * handlers in place are kept for clrun_test_report_fatal_signals. Call first in main(), before
 * any OpenCL call and before cmocka runs a test. */
static inline void clrun_test_device_environment(char *cache_dir, size_t size)
{
    setenv("POCL_DEVICES", "pthread pthread", 0);
    const char *tmp = getenv("TMPDIR");
    snprintf(cache_dir, size, "%s/clrun-test-cache-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (mkdtemp(cache_dir) == NULL) {
        fprintf(stderr, "cannot create a temporary cache directory\n");
        exit(1);
    }
    setenv("CLRUN_CACHE_DIR", cache_dir, 1);
    for (int i = 0; i < CLRUN_TEST_FATAL_SIGNALS; i++)
        sigaction(clrun_test_fatal_signal(i), NULL, &clrun_test_handlers_before_cmocka()[i]);
}

#ifdef CLRUN_TOP_SRCDIR
/* A file of the source tree (relative, e.g. "tests/data/graphs/skip.graph") under $srcdir (set
 * by 'make check'), else the configure-time path; into out. */
static inline void clrun_test_source_path(const char *relative, char *out, size_t size)
{
    const char *srcdir = getenv("srcdir");
    snprintf(out, size, "%s/%s", srcdir && srcdir[0] ? srcdir : CLRUN_TOP_SRCDIR, relative);
}
#endif

/* CLRUN_TEST_FILTER and CLRUN_TEST_SKIP, cmocka patterns ("conv2d_*"): run only the tests that
 * match the one, leave out those that match the other. Expands where <cmocka.h> is included. */
#define CLRUN_TEST_FILTERS_FROM_ENVIRONMENT()                                                      \
    do {                                                                                           \
        if (getenv("CLRUN_TEST_FILTER"))                                                           \
            cmocka_set_test_filter(getenv("CLRUN_TEST_FILTER"));                                   \
        if (getenv("CLRUN_TEST_SKIP"))                                                             \
            cmocka_set_skip_filter(getenv("CLRUN_TEST_SKIP"));                                     \
    } while (0)

/* How many random graphs a test of random graphs runs: CLRUN_TEST_ROUNDS (a positive integer)
 * when set, else `full`, the count CI runs. Developers set it lower for a quicker local run. */
static inline int clrun_test_rounds(int full)
{
    const char *text = getenv("CLRUN_TEST_ROUNDS");
    char *end = NULL;
    long rounds = text ? strtol(text, &end, 10) : 0;
    if (text == NULL || end == text || *end != '\0' || rounds < 1 || rounds > 1000000) {
        if (text)
            fprintf(stderr, "CLRUN_TEST_ROUNDS='%s' is not a positive integer: running %d rounds\n", text, full);
        return full;
    }
    return (int)rounds;
}

/* rm -r of the test's cache directory (files one level deep, then the directory). */
static inline void clrun_test_remove_dir(const char *dir)
{
    char command[4200];
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

#endif
