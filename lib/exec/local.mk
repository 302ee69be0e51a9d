# exec: the schedule (order, last uses, reuse and donation choices, bounds) and the executor
# (pooled, naive and planned modes). Depends on everything below it.
libclrun_internal_la_SOURCES += \
	lib/exec/schedule.c lib/exec/schedule.h lib/exec/schedule_concat.c \
	lib/exec/exec.c lib/exec/exec_internal.h lib/exec/exec_share.h lib/exec/exec_watch.h \
	lib/exec/exec_budget.c \
	lib/exec/exec_offload.c \
	lib/exec/exec_rate.c \
	lib/exec/exec_constants.c \
	lib/exec/exec_memory.c \
	lib/exec/exec_run.c \
	lib/exec/exec_loop.c \
	lib/exec/exec_planned.c \
	lib/exec/pipeline.c lib/exec/pipeline_internal.h \
	lib/exec/run_parallel.c lib/exec/run_parallel_internal.h

if HAVE_CMOCKA
check_PROGRAMS += tests/test_exec tests/test_handles tests/test_threads
TESTS += tests/test_exec tests/test_handles tests/test_threads
tests_test_exec_SOURCES = tests/test_exec.c tests/device_test.h tests/rng.h
tests_test_exec_CFLAGS = $(TEST_CFLAGS)
tests_test_exec_LDADD = $(TEST_LDADD)
tests_test_handles_SOURCES = tests/test_handles.c tests/device_test.h
tests_test_handles_CFLAGS = $(TEST_CFLAGS)
tests_test_handles_LDADD = $(TEST_LDADD)
tests_test_threads_SOURCES = tests/test_threads.c tests/device_test.h tests/rng.h
tests_test_threads_CFLAGS = $(TEST_CFLAGS)
tests_test_threads_LDADD = $(TEST_LDADD)

check_PROGRAMS += tests/test_exec_memory
TESTS += tests/test_exec_memory
tests_test_exec_memory_SOURCES = tests/test_exec_memory.c tests/device_test.h
tests_test_exec_memory_CFLAGS = $(TEST_CFLAGS)
tests_test_exec_memory_LDADD = $(TEST_LDADD)

check_PROGRAMS += tests/test_exec_layout
TESTS += tests/test_exec_layout
tests_test_exec_layout_SOURCES = tests/test_exec_layout.c tests/device_test.h
tests_test_exec_layout_CFLAGS = $(TEST_CFLAGS)
tests_test_exec_layout_LDADD = $(TEST_LDADD)

check_PROGRAMS += tests/test_exec_loop
TESTS += tests/test_exec_loop
tests_test_exec_loop_SOURCES = tests/test_exec_loop.c tests/device_test.h
tests_test_exec_loop_CFLAGS = $(TEST_CFLAGS)
tests_test_exec_loop_LDADD = $(TEST_LDADD)
endif

# Benchmarks are built by 'make bench' and never run as tests: speed is measured, not asserted.
EXTRA_PROGRAMS += bench/bench_exec bench/bench_models bench/bench_schedule
BENCH_LIST += bench/bench_exec bench/bench_models bench/bench_schedule
bench_bench_schedule_SOURCES = bench/bench_schedule.c
bench_bench_schedule_LDADD = libclrun-internal.la
bench_bench_exec_SOURCES = bench/bench_exec.c tests/node_memory.h
bench_bench_exec_LDADD = libclrun-internal.la
bench_bench_models_SOURCES = bench/bench_models.c
bench_bench_models_LDADD = libclrun-internal.la

check_PROGRAMS += tests/test_exec_index
TESTS += tests/test_exec_index
tests_test_exec_index_SOURCES = tests/test_exec_index.c tests/device_test.h
tests_test_exec_index_CFLAGS = $(TEST_CFLAGS)
tests_test_exec_index_LDADD = $(TEST_LDADD)

# Guarded nodes (an If with a run-time condition): the branch not taken skipped, in every mode.
check_PROGRAMS += tests/test_exec_guards
TESTS += tests/test_exec_guards
tests_test_exec_guards_SOURCES = tests/test_exec_guards.c tests/device_test.h
tests_test_exec_guards_CFLAGS = $(TEST_CFLAGS)
tests_test_exec_guards_LDADD = $(TEST_LDADD)

# An executor under a memory budget: recomputation after the peak, the same bits in every mode.
check_PROGRAMS += tests/test_exec_budget
TESTS += tests/test_exec_budget
tests_test_exec_budget_SOURCES = tests/test_exec_budget.c tests/device_test.h
tests_test_exec_budget_CFLAGS = $(TEST_CFLAGS)
tests_test_exec_budget_CPPFLAGS = $(AM_CPPFLAGS) -DCLRUN_TOP_SRCDIR='"$(abs_top_srcdir)"'
tests_test_exec_budget_LDADD = $(TEST_LDADD)

# Concats assembled in place: the schedule's choice without OpenCL, then the same bits as the
# copies in every mode, allocator and queue order, the copies left out, and failing calls.
check_PROGRAMS += tests/test_exec_concat
TESTS += tests/test_exec_concat
tests_test_exec_concat_SOURCES = tests/test_exec_concat.c tests/device_test.h
tests_test_exec_concat_CFLAGS = $(TEST_CFLAGS)
tests_test_exec_concat_LDADD = $(TEST_LDADD)

# Host offload under a memory budget: the rewrite without OpenCL, then the same bits in every
# mode and allocator, and a budget that only offload meets.
check_PROGRAMS += tests/test_exec_offload
TESTS += tests/test_exec_offload
tests_test_exec_offload_SOURCES = tests/test_exec_offload.c tests/device_test.h
tests_test_exec_offload_CFLAGS = $(TEST_CFLAGS)
tests_test_exec_offload_CPPFLAGS = $(AM_CPPFLAGS) -DCLRUN_TOP_SRCDIR='"$(abs_top_srcdir)"'
tests_test_exec_offload_LDADD = $(TEST_LDADD)

# Micro-batches streamed through a two-device pipeline against the sequential pipeline and one
# device (issue 28): time per micro-batch, bubble fraction, bytes moved.
EXTRA_PROGRAMS += bench/bench_pipeline
BENCH_LIST += bench/bench_pipeline
bench_bench_pipeline_SOURCES = bench/bench_pipeline.c bench/timing.h
bench_bench_pipeline_LDADD = libclrun-internal.la
