# Static memory planner and the lifetime CSV format (paths relative to the top of the tree).
libclrun_internal_la_SOURCES += \
	lib/lifetimes.c
clruninclude_HEADERS += \
	include/clrun/lifetimes.h

EXTRA_DIST += \
	tests/data/lifetimes/small_crlf.csv \
	tests/data/lifetimes/small_planned.csv \
	tests/fuzz/corpus/lifetimes/valid \
	tests/fuzz/corpus/lifetimes/offsets_crlf \
	tests/fuzz/corpus/lifetimes/empty_interval \
	tests/fuzz/corpus/lifetimes/overflow \
	tests/fuzz/corpus/lifetimes/junk

if HAVE_CMOCKA
check_PROGRAMS += tests/test_lifetimes
TESTS += tests/test_lifetimes
tests_test_lifetimes_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_lifetimes_LDADD = libclrun-internal.la $(CMOCKA_LIBS)
endif

if HAVE_FUZZ
EXTRA_PROGRAMS += tests/fuzz/fuzz_lifetimes
FUZZ_PROGRAMS += tests/fuzz/fuzz_lifetimes
tests_fuzz_fuzz_lifetimes_SOURCES = tests/fuzz/fuzz_lifetimes.c
tests_fuzz_fuzz_lifetimes_CFLAGS = $(AM_CFLAGS) $(FUZZ_CFLAGS)
tests_fuzz_fuzz_lifetimes_LDFLAGS = $(FUZZ_CFLAGS)
tests_fuzz_fuzz_lifetimes_LDADD = libclrun-internal.la
endif
