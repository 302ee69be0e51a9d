# fuse: the rewrites an executor applies at creation: constant folding on the device (fold_constants.c)
# and of batch norms into convolutions (fold_bn.c), elementwise groups (group.c decides, pure
# C), their generated kernels (codegen.c, text only), and the rewrite that builds them and puts
# fused nodes in a draft of the graph (fuse.c, draft.c). Depends on graph, device and ops.
libclrun_internal_la_SOURCES += \
	lib/fuse/draft.c lib/fuse/draft.h \
	lib/fuse/group.c lib/fuse/group.h \
	lib/fuse/describe.c lib/fuse/codegen.c lib/fuse/codegen.h \
	lib/fuse/fold_constants.c lib/fuse/fold_bn.c lib/fuse/fold_dequant.c lib/fuse/fold.h \
	lib/fuse/epilogue.c lib/fuse/epilogue.h \
	lib/fuse/siblings.c lib/fuse/siblings.h \
	lib/fuse/fuse.c lib/fuse/fuse.h

if HAVE_CMOCKA
check_PROGRAMS += tests/test_fuse
TESTS += tests/test_fuse
tests_test_fuse_SOURCES = tests/test_fuse.c tests/device_test.h tests/rng.h examples/models.c \
	examples/models.h
tests_test_fuse_CPPFLAGS = $(AM_CPPFLAGS) -DCLRUN_TOP_SRCDIR='"$(abs_top_srcdir)"'
tests_test_fuse_CFLAGS = $(TEST_CFLAGS)
tests_test_fuse_LDADD = $(TEST_LDADD)
endif

# bench_fusion: fused against unfused executors on the same graphs, alternating, in one run.
EXTRA_PROGRAMS += bench/bench_fusion
BENCH_LIST += bench/bench_fusion
bench_bench_fusion_SOURCES = bench/bench_fusion.c examples/models.c examples/models.h tests/rng.h
bench_bench_fusion_LDADD = libclrun-internal.la
