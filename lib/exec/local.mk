# exec: the schedule (order, last uses, reuse and donation choices, bounds) and the executor
# (pooled, naive and planned modes). Depends on everything below it.
libclrun_internal_la_SOURCES += \
	lib/exec/schedule.c lib/exec/schedule.h \
	lib/exec/exec.c

if HAVE_CMOCKA
check_PROGRAMS += tests/test_exec
TESTS += tests/test_exec
tests_test_exec_SOURCES = tests/test_exec.c tests/device_test.h
tests_test_exec_CFLAGS = $(TEST_CFLAGS)
tests_test_exec_LDADD = $(TEST_LDADD)
endif

# Benchmarks are built by 'make bench' and never run as tests: speed is measured, not asserted.
EXTRA_PROGRAMS += bench/bench_exec bench/bench_models
BENCH_LIST += bench/bench_exec bench/bench_models
bench_bench_exec_SOURCES = bench/bench_exec.c
bench_bench_exec_LDADD = libclrun-internal.la
bench_bench_models_SOURCES = bench/bench_models.c
bench_bench_models_LDADD = libclrun-internal.la
