# Static memory planner (paths relative to the top of the tree); the lifetime CSV format it reads
# is core's (lib/core/lifetimes.c), shared with trace replay.
libclrun_internal_la_SOURCES += \
	lib/plan/plan.c \
	lib/plan/plan_gen.c \
	lib/plan/plan_greedy.c \
	lib/plan/plan_fit.c \
	lib/plan/plan_parts.c \
	lib/plan/plan_decide.c \
	lib/plan/plan_decide.h \
	lib/plan/plan_decide_tables.c \
	lib/plan/plan_complete.c \
	lib/plan/plan_search.c \
	lib/plan/plan_skyline.c \
	lib/plan/plan_sweep.c \
	lib/plan/plan_svg.c \
	lib/plan/plan_internal.h
clruninclude_HEADERS += \
	include/clrun/plan.h \
	include/clrun/plan_gen.h


# `clrun plan --capacity`, from the command line (the harness exports srcdir).
TESTS += tests/cli_plan.sh
EXTRA_DIST += tests/cli_plan.sh \
	tests/data/lifetimes/small_crlf.csv \
	tests/data/lifetimes/small_planned.csv \
	tests/fuzz/corpus/lifetimes/valid \
	tests/fuzz/corpus/lifetimes/offsets_crlf \
	tests/fuzz/corpus/lifetimes/empty_interval \
	tests/fuzz/corpus/lifetimes/overflow \
	tests/fuzz/corpus/lifetimes/junk

if HAVE_CMOCKA
check_PROGRAMS += tests/test_lifetimes tests/test_plan
TESTS += tests/test_lifetimes tests/test_plan
tests_test_lifetimes_SOURCES = tests/test_lifetimes.c
tests_test_lifetimes_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_lifetimes_LDADD = libclrun-internal.la $(CMOCKA_LIBS)
tests_test_plan_SOURCES = tests/test_plan.c
tests_test_plan_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_plan_LDADD = libclrun-internal.la $(CMOCKA_LIBS)
endif

# `make bench`: quality and speed table of the planner.
BENCH_LIST += bench/bench_plan
EXTRA_PROGRAMS += bench/bench_plan
bench_bench_plan_SOURCES = bench/bench_plan.c
bench_bench_plan_LDADD = libclrun-internal.la

if HAVE_FUZZ
EXTRA_PROGRAMS += tests/fuzz/fuzz_lifetimes
FUZZ_LIST += tests/fuzz/fuzz_lifetimes
# The parser is compiled into the target itself: only instrumented code guides libFuzzer.
tests_fuzz_fuzz_lifetimes_SOURCES = tests/fuzz/fuzz_lifetimes.c lib/core/lifetimes.c
tests_fuzz_fuzz_lifetimes_CFLAGS = $(AM_CFLAGS) $(FUZZ_CFLAGS)
tests_fuzz_fuzz_lifetimes_LDFLAGS = $(FUZZ_CFLAGS)
tests_fuzz_fuzz_lifetimes_LDADD = libclrun-internal.la
endif
