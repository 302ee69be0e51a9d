/* Status table, OpenCL error names and the CLRUN_* option parser: no device needed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <clrun/clrun.h>

#include "core/options.h"

static void clear_clrun_environment(void)
{
    for (size_t i = 0; i < clrun__options_count(); i++)
        unsetenv(clrun__options_doc(i)->name);
}

static int reset_env(void **state)
{
    (void)state;
    clear_clrun_environment();
    return 0;
}

static void status_names_and_messages_come_from_one_table(void **state)
{
    (void)state;
    assert_string_equal(clrun_status_name(CLRUN_OK), "CLRUN_OK");
    assert_string_equal(clrun_status_name(CLRUN_ERROR_OUT_OF_MEMORY), "CLRUN_ERROR_OUT_OF_MEMORY");
    assert_string_equal(clrun_strerror(CLRUN_ERROR_INVALID_FREE),
                        "free of a block that is not live (double or foreign free)");
    assert_string_equal(clrun_status_name(12345), "CLRUN_UNKNOWN");
    assert_string_equal(clrun_strerror(12345), "unknown status");
}

static void opencl_codes_have_their_names(void **state)
{
    (void)state;
    assert_string_equal(clrun_cl_error_name(-13), "CL_MISALIGNED_SUB_BUFFER_OFFSET");
    assert_string_equal(clrun_cl_error_name(-4), "CL_MEM_OBJECT_ALLOCATION_FAILURE");
    assert_string_equal(clrun_cl_error_name(-1001), "CL_PLATFORM_NOT_FOUND_KHR");
    assert_string_equal(clrun_cl_error_name(-9999), "CL_UNKNOWN_ERROR");
}

static void booleans_accept_every_documented_spelling(void **state)
{
    (void)state;
    const char *yes[] = {"1", "true", "TRUE", "yes", "Yes", "on", "ON"};
    const char *no[] = {"0", "false", "no", "NO", "off", "Off"};
    bool v;
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
        v = false;
        assert_true(clrun__parse_bool(yes[i], &v));
        assert_true(v);
    }
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
        v = true;
        assert_true(clrun__parse_bool(no[i], &v));
        assert_false(v);
    }
    assert_false(clrun__parse_bool("2", &v));
    assert_false(clrun__parse_bool("", &v));
    assert_false(clrun__parse_bool("yess", &v));
}

static void sizes_accept_binary_suffixes_and_reject_overflow(void **state)
{
    (void)state;
    uint64_t v = 0;
    assert_true(clrun__parse_size("4096", &v));
    assert_int_equal(v, 4096);
    assert_true(clrun__parse_size("512K", &v));
    assert_int_equal(v, 512u << 10);
    assert_true(clrun__parse_size("3m", &v));
    assert_int_equal(v, 3u << 20);
    assert_true(clrun__parse_size("2GiB", &v));
    assert_int_equal(v, (uint64_t)2 << 30);
    assert_true(clrun__parse_size("1T", &v));
    assert_int_equal(v, (uint64_t)1 << 40);
    assert_false(clrun__parse_size("-1", &v));
    assert_false(clrun__parse_size(" 1", &v));
    assert_false(clrun__parse_size("1X", &v));
    assert_false(clrun__parse_size("K", &v));
    assert_false(clrun__parse_size("99999999999999999999", &v));
    assert_false(clrun__parse_size("17179869184G", &v)); /* 2^34 GiB = 2^64: overflows */
}

/* The public parsers refuse NULL text and a NULL out-pointer instead of crashing. */
static void public_parsers_refuse_null_pointers(void **state)
{
    (void)state;
    bool b = true;
    uint64_t size = 7;
    assert_false(clrun_parse_bool("yes", NULL));
    assert_false(clrun_parse_bool(NULL, &b));
    assert_false(clrun_parse_size("1K", NULL));
    assert_false(clrun_parse_size(NULL, &size));
    assert_true(b);
    assert_int_equal(size, 7);
    assert_true(clrun_parse_bool("off", &b));
    assert_false(b);
    assert_true(clrun_parse_size("1K", &size));
    assert_int_equal(size, 1024);
}

static void defaults_hold_when_nothing_is_set(void **state)
{
    (void)state;
    clrun__options o;
    char err[256];
    assert_int_equal(clrun__options_load(&o, err, sizeof err), CLRUN_OK);
    assert_string_equal(clrun__allocator_choice_name(&o.allocator), clrun_strategy_default()->name);
    assert_int_equal(o.allocator.mode, CLRUN__EXEC_POOLED);
    assert_true(o.cache.enabled);
    assert_false(o.cache.always);
    assert_false(o.preallocate);
    assert_false(o.guard);
    assert_int_equal(o.pool_limit, 0);
    assert_int_equal(o.log_level, CLRUN_LOG_NONE);
    assert_true(o.mem_fraction > 0.89 && o.mem_fraction < 0.91);
}

static void environment_values_are_parsed(void **state)
{
    (void)state;
    setenv("CLRUN_ALLOCATOR", "slab", 1);
    setenv("CLRUN_POOL_LIMIT", "64M", 1);
    setenv("CLRUN_CACHE", "off", 1);
    setenv("CLRUN_DEBUG", "guard", 1);
    setenv("CLRUN_MEM_FRACTION", "0.5", 1);
    setenv("CLRUN_LOG", "debug", 1);
    setenv("CLRUN_DEVICE", "pthread", 1);
    clrun__options o;
    char err[256];
    assert_int_equal(clrun__options_load(&o, err, sizeof err), CLRUN_OK);
    assert_string_equal(clrun__allocator_choice_name(&o.allocator), "slab");
    assert_int_equal(o.pool_limit, 64u << 20);
    assert_false(o.cache.enabled);
    assert_true(o.guard);
    assert_true(o.mem_fraction == 0.5);
    assert_int_equal(o.log_level, CLRUN_LOG_DEBUG);
    assert_string_equal(o.device, "pthread");
}

static void unknown_allocator_names_the_variable_and_the_valid_names(void **state)
{
    (void)state;
    setenv("CLRUN_ALLOCATOR", "firstfit", 1);
    clrun__options o;
    char err[256];
    assert_int_equal(clrun__options_load(&o, err, sizeof err), CLRUN_ERROR_INVALID_OPTION);
    assert_non_null(strstr(err, "CLRUN_ALLOCATOR='firstfit'"));
    assert_non_null(strstr(err, "buddy|slab|bump"));
}

static void invalid_values_name_the_variable_and_what_it_accepts(void **state)
{
    (void)state;
    static const struct {
        const char *name, *value, *expected;
    } cases[] = {
        {"CLRUN_CACHE", "maybe", "1|0|true|false|yes|no|on|off"},
        {"CLRUN_POOL_LIMIT", "12Q", "K, M, G or T suffix"},
        {"CLRUN_MEM_FRACTION", "1.5", "0<F<=1"},
        {"CLRUN_MEM_FRACTION", "0", "accepted values are 0<F<=1"},
        {"CLRUN_LOG", "loud", "none|error|warn|info|debug"},
        {"CLRUN_DEBUG", "fence", "none|guard"},
        {"CLRUN_QUEUE", "sideways", "in-order|out-of-order"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        clear_clrun_environment();
        setenv(cases[i].name, cases[i].value, 1);
        clrun__options o;
        char err[256];
        assert_int_equal(clrun__options_load(&o, err, sizeof err), CLRUN_ERROR_INVALID_OPTION);
        assert_non_null(strstr(err, cases[i].name));
        assert_non_null(strstr(err, cases[i].value));
        assert_non_null(strstr(err, cases[i].expected));
    }
}

static void every_variable_is_documented(void **state)
{
    (void)state;
    assert_true(clrun__options_count() >= 11);
    for (size_t i = 0; i < clrun__options_count(); i++) {
        const clrun__option_doc *d = clrun__options_doc(i);
        assert_true(strncmp(d->name, "CLRUN_", 6) == 0);
        assert_true(strlen(d->help) > 10);
        assert_true(strlen(d->accepted) > 0);
    }
    assert_null(clrun__options_doc(clrun__options_count()));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_names_and_messages_come_from_one_table),
        cmocka_unit_test(opencl_codes_have_their_names),
        cmocka_unit_test(booleans_accept_every_documented_spelling),
        cmocka_unit_test(sizes_accept_binary_suffixes_and_reject_overflow),
        cmocka_unit_test(public_parsers_refuse_null_pointers),
        cmocka_unit_test_setup(defaults_hold_when_nothing_is_set, reset_env),
        cmocka_unit_test_setup(environment_values_are_parsed, reset_env),
        cmocka_unit_test_setup(unknown_allocator_names_the_variable_and_the_valid_names, reset_env),
        cmocka_unit_test_setup(invalid_values_name_the_variable_and_what_it_accepts, reset_env),
        cmocka_unit_test(every_variable_is_documented),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
