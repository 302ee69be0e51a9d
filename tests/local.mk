# Unit tests (pure) and device tests (POCL in CI), all cmocka.
AM_TESTS_ENVIRONMENT = LSAN_OPTIONS="suppressions=$(abs_top_srcdir)/tests/lsan.supp:print_suppressions=0" ; export LSAN_OPTIONS ;
EXTRA_DIST += tests/lsan.supp tests/device_test.h

if HAVE_CMOCKA
TEST_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
TEST_LDADD = libclrun-internal.la $(CMOCKA_LIBS)

check_PROGRAMS += tests/test_options tests/test_context tests/test_exec
TESTS += tests/test_options tests/test_context tests/test_exec

tests_test_options_SOURCES = tests/test_options.c
tests_test_options_CFLAGS = $(TEST_CFLAGS)
tests_test_options_LDADD = $(TEST_LDADD)

tests_test_context_SOURCES = tests/test_context.c tests/device_test.h
tests_test_context_CFLAGS = $(TEST_CFLAGS)
tests_test_context_LDADD = $(TEST_LDADD)

tests_test_exec_SOURCES = tests/test_exec.c tests/device_test.h
tests_test_exec_CFLAGS = $(TEST_CFLAGS)
tests_test_exec_LDADD = $(TEST_LDADD)

check_PROGRAMS += tests/test_exec_layout
TESTS += tests/test_exec_layout
tests_test_exec_layout_SOURCES = tests/test_exec_layout.c tests/device_test.h
tests_test_exec_layout_CFLAGS = $(TEST_CFLAGS)
tests_test_exec_layout_LDADD = $(TEST_LDADD)
endif
