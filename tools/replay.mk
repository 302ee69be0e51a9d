# clrun replay (an allocation trace through a strategy, offsets only), and the pool's tests:
# the allocator core (pure), the device pool and its 4-thread stress test (POCL in CI), and the
# replay CLI. Included from the top Makefile.am; paths are relative to the top.

clrun_SOURCES += tools/cmd_replay.c

# Run from the build directory by the test harness, which exports srcdir; CLRUN_BIN overrides
# the tool's path.
TESTS += tests/cli_replay.sh
EXTRA_DIST += tests/cli_replay.sh \
	tests/data/traces/gen_traces.py \
	tests/data/traces/tiny.csv \
	tests/data/traces/malformed.csv \
	tests/data/traces/resnet50_train.csv \
	tests/data/traces/resnet50_infer.csv \
	tests/data/traces/growing.csv \
	tests/data/traces/random.csv

if HAVE_CMOCKA
check_PROGRAMS += tests/test_allocator tests/test_pool tests/test_pool_threads
TESTS += tests/test_allocator tests/test_pool tests/test_pool_threads

tests_test_allocator_SOURCES = tests/test_allocator.c
tests_test_allocator_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_allocator_LDADD = libclrun-internal.la $(CMOCKA_LIBS)

tests_test_pool_SOURCES = tests/test_pool.c tests/device_test.h
tests_test_pool_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_pool_LDADD = libclrun-internal.la $(CMOCKA_LIBS)

tests_test_pool_threads_SOURCES = tests/test_pool_threads.c tests/device_test.h
tests_test_pool_threads_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_pool_threads_LDADD = libclrun-internal.la $(CMOCKA_LIBS)
endif
