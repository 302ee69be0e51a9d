# Static memory planner and the lifetime CSV format (paths relative to the top of the tree).
libclrun_internal_la_SOURCES += \
	lib/lifetimes.c \
	lib/plan.c \
	lib/plan_greedy.c \
	lib/plan_parts.c \
	lib/plan_decide.c \
	lib/plan_complete.c \
	lib/plan_search.c \
	lib/plan_skyline.c \
	lib/plan_svg.c \
	lib/plan_internal.h
clruninclude_HEADERS += \
	include/clrun/lifetimes.h \
	include/clrun/plan.h

# `clrun plan` (the clrun program is defined in tools/local.mk).
clrun_SOURCES += tools/cmd_plan.c tools/cmd_plan.h tools/plan_gen.c tools/plan_gen.h

EXTRA_DIST += \
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
tests_test_plan_SOURCES = tests/test_plan.c tools/plan_gen.c tools/plan_gen.h
tests_test_plan_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools
tests_test_plan_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_plan_LDADD = libclrun-internal.la $(CMOCKA_LIBS)
endif

# `make bench`: quality and speed table of the planner.
BENCH_LIST += bench/bench_plan
EXTRA_PROGRAMS += bench/bench_plan
bench_bench_plan_SOURCES = bench/bench_plan.c tools/plan_gen.c tools/plan_gen.h
bench_bench_plan_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools
bench_bench_plan_LDADD = libclrun-internal.la

if HAVE_FUZZ
EXTRA_PROGRAMS += tests/fuzz/fuzz_lifetimes
FUZZ_LIST += tests/fuzz/fuzz_lifetimes
# The parser is compiled into the target itself: only instrumented code guides libFuzzer.
tests_fuzz_fuzz_lifetimes_SOURCES = tests/fuzz/fuzz_lifetimes.c lib/lifetimes.c
tests_fuzz_fuzz_lifetimes_CFLAGS = $(AM_CFLAGS) $(FUZZ_CFLAGS)
tests_fuzz_fuzz_lifetimes_LDFLAGS = $(FUZZ_CFLAGS)
tests_fuzz_fuzz_lifetimes_LDADD = libclrun-internal.la
endif
