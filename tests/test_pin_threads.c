/* The command line's CLRUN_PIN_THREADS (tools/pin_threads.c), pure (no device): which values it
 * takes, that POCL_AFFINITY is set only where POCL's pinning of thread i to CPU i can succeed
 * (the process may run on every CPU), and never over a choice the user made. */
#define _GNU_SOURCE
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../tools/pin_threads.h"

static void clear(void)
{
    unsetenv("CLRUN_PIN_THREADS");
    unsetenv("POCL_AFFINITY");
    unsetenv("POCL_MAX_PTHREAD_COUNT");
}

static void the_choice_takes_booleans_and_nothing_else(void **state)
{
    (void)state;
    static const char *const on[] = {"1", "true", "YES", "On"}, *const off[] = {"0", "False", "no", "OFF"};
    for (size_t i = 0; i < 4; i++) {
        bool pin = false;
        assert_true(clrun_cli_parse_pin(on[i], &pin));
        assert_true(pin);
        assert_true(clrun_cli_parse_pin(off[i], &pin));
        assert_false(pin);
    }
    static const char *const bad[] = {"", "2", "auto", "maybe", "1 ", " 0", "yess"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bool pin = true;
        assert_false(clrun_cli_parse_pin(bad[i], &pin));
    }
    clear();
    setenv("CLRUN_PIN_THREADS", "maybe", 1);
    char problem[256] = "";
    assert_int_equal(clrun_cli_pin_threads(problem, sizeof problem), -1);
    assert_non_null(strstr(problem, "CLRUN_PIN_THREADS"));
    assert_non_null(strstr(problem, "'maybe'"));
    assert_null(getenv("POCL_AFFINITY"));
    clear();
}

/* The CPUs this process may run on, as the machine counts them: every one, when it may. */
static void pins_where_every_cpu_is_allowed_and_no_choice_was_made(void **state)
{
    (void)state;
    char problem[256];
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    clear();
    bool every = clrun_cli_every_cpu();
    assert_int_equal(clrun_cli_pin_threads(problem, sizeof problem), 0);
    if (every)
        assert_string_equal(getenv("POCL_AFFINITY"), "1");
    else
        assert_null(getenv("POCL_AFFINITY"));
    /* a choice made is kept */
    clear();
    setenv("POCL_AFFINITY", "0", 1);
    assert_int_equal(clrun_cli_pin_threads(problem, sizeof problem), 0);
    assert_string_equal(getenv("POCL_AFFINITY"), "0");
    clear();
    setenv("CLRUN_PIN_THREADS", "off", 1);
    assert_int_equal(clrun_cli_pin_threads(problem, sizeof problem), 0);
    assert_null(getenv("POCL_AFFINITY"));
    /* more threads asked of POCL than there are CPUs: thread i would have no CPU i */
    clear();
    char count[32];
    snprintf(count, sizeof count, "%ld", cpus + 1);
    setenv("POCL_MAX_PTHREAD_COUNT", count, 1);
    assert_int_equal(clrun_cli_pin_threads(problem, sizeof problem), 0);
    assert_null(getenv("POCL_AFFINITY"));
    setenv("POCL_MAX_PTHREAD_COUNT", "1", 1);
    assert_int_equal(clrun_cli_pin_threads(problem, sizeof problem), 0);
    if (every)
        assert_string_equal(getenv("POCL_AFFINITY"), "1");
    clear();
}

/* A process confined to some of the CPUs (a container's cpuset, mpirun binding a rank to a
 * core) is not pinned: POCL would pin its threads to CPUs 0, 1, ... whatever the set. */
static void a_process_on_part_of_the_cpus_is_not_pinned(void **state)
{
    (void)state;
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
        skip();
    cpu_set_t saved, one;
    assert_int_equal(sched_getaffinity(0, sizeof saved, &saved), 0);
    if (CPU_COUNT(&saved) < 2)
        skip();
    CPU_ZERO(&one);
    CPU_SET(1, &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    clear();
    char problem[256];
    assert_false(clrun_cli_every_cpu());
    assert_int_equal(clrun_cli_pin_threads(problem, sizeof problem), 0);
    assert_null(getenv("POCL_AFFINITY"));
    assert_int_equal(sched_setaffinity(0, sizeof saved, &saved), 0);
    clear();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_choice_takes_booleans_and_nothing_else),
        cmocka_unit_test(pins_where_every_cpu_is_allowed_and_no_choice_was_made),
        cmocka_unit_test(a_process_on_part_of_the_cpus_is_not_pinned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
