# clrun strategies: the allocator strategies, their tests and their benchmark.
# Included from the top Makefile.am; paths are relative to the top.

libclrun_internal_la_SOURCES += \
	strategies/chunk_index.h \
	strategies/buddy.c strategies/buddy_chunk.c strategies/buddy_chunk.h \
	strategies/slab.c strategies/slab_classes.c strategies/slab_classes.h \
	strategies/page_runs.c strategies/page_runs.h \
	strategies/bump.c \
	strategies/tlsf.c strategies/tlsf_blocks.c strategies/tlsf_internal.h \
	strategies/registry.c

if HAVE_CMOCKA
check_PROGRAMS += tests/test_strategies
TESTS += tests/test_strategies
tests_test_strategies_SOURCES = tests/test_strategies.c tests/rng.h
tests_test_strategies_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_strategies_LDADD = libclrun-internal.la $(CMOCKA_LIBS)
endif

# Built by `make bench`, never run as a test.
EXTRA_PROGRAMS += bench/bench_alloc
BENCH_LIST += bench/bench_alloc
bench_bench_alloc_SOURCES = bench/bench_alloc.c tests/rng.h
bench_bench_alloc_LDADD = libclrun-internal.la
