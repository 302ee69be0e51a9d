# memory: the allocator core (policy, limits, statistics; no OpenCL), the device pool (chunks
# are cl_mem buffers, blocks are sub-buffers), buffer I/O and the trace replay (a simulated
# pool, with the binned and best-fit baselines). Depends on core and device; the
# strategies (strategies/) are its pure offset managers.
libclrun_internal_la_SOURCES += \
	lib/memory/allocator.c lib/memory/allocator.h \
	lib/memory/pool.c lib/memory/pool.h lib/memory/pool_internal.h \
	lib/memory/pool_handles.c lib/memory/pool_guard.c lib/memory/pool_resident.c \
	lib/memory/pool_pending.c \
	lib/memory/buffer_io.c \
	lib/memory/replay.c lib/memory/replay_binned.c lib/memory/replay_best_fit.c \
	lib/memory/replay_internal.h
clruninclude_HEADERS += include/clrun/replay.h

if HAVE_CMOCKA
check_PROGRAMS += tests/test_allocator tests/test_replay tests/test_pool tests/test_pool_threads \
	tests/test_pool_regions
TESTS += tests/test_allocator tests/test_replay tests/test_pool tests/test_pool_threads tests/test_pool_regions

tests_test_allocator_SOURCES = tests/test_allocator.c
tests_test_allocator_CFLAGS = $(TEST_CFLAGS)
tests_test_allocator_LDADD = $(TEST_LDADD)

tests_test_replay_SOURCES = tests/test_replay.c
tests_test_replay_CFLAGS = $(TEST_CFLAGS)
tests_test_replay_LDADD = $(TEST_LDADD)

tests_test_pool_SOURCES = tests/test_pool.c tests/device_test.h
tests_test_pool_CFLAGS = $(TEST_CFLAGS)
tests_test_pool_LDADD = $(TEST_LDADD)

tests_test_pool_regions_SOURCES = tests/test_pool_regions.c tests/device_test.h
tests_test_pool_regions_CFLAGS = $(TEST_CFLAGS)
tests_test_pool_regions_LDADD = $(TEST_LDADD) -lpthread

tests_test_pool_threads_SOURCES = tests/test_pool_threads.c tests/device_test.h
tests_test_pool_threads_CFLAGS = $(TEST_CFLAGS)
tests_test_pool_threads_LDADD = $(TEST_LDADD)
endif

# Built by `make bench`, never run as a test: what allocators reserve on traces, in one run.
EXTRA_PROGRAMS += bench/bench_replay
BENCH_LIST += bench/bench_replay
bench_bench_replay_SOURCES = bench/bench_replay.c tools/plan_gen.c tools/plan_gen.h
bench_bench_replay_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools
bench_bench_replay_LDADD = libclrun-internal.la
