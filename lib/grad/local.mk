# Gradients: reverse-mode differentiation as a rewrite of a graph (pure C, no OpenCL), one file
# of rules per op family.
libclrun_internal_la_SOURCES += \
	lib/grad/grad.c lib/grad/grad.h \
	lib/grad/grad_emit.c \
	lib/grad/grad_elementwise.c \
	lib/grad/grad_matmul.c \
	lib/grad/grad_norm.c \
	lib/grad/grad_layout.c \
	lib/grad/grad_conv.c \
	lib/grad/grad_index.c \
	lib/grad/train_graph.c lib/grad/train_graph.h \
	lib/grad/train_bn.c lib/grad/train_bn.h \
	lib/grad/remat.c lib/grad/remat_drop.h
clruninclude_HEADERS += \
	include/clrun/grad.h \
	include/clrun/remat.h \
	include/clrun/train_graph.h

# Every gradient rule against central finite differences of the double-precision graph
# reference (tests/graph_reference.c), run on POCL; refusals, unused wrt, and the same bits with
# fusion on or off and under every allocator.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_grad
TESTS += tests/test_grad
tests_test_grad_SOURCES = tests/test_grad.c tests/graph_reference.c tests/graph_reference.h \
	tests/graph_case.h tests/device_test.h tests/rng.h
tests_test_grad_CFLAGS = $(TEST_CFLAGS)
tests_test_grad_LDADD = $(TEST_LDADD) -lm

# Rematerialisation's rewrite, without a device: what each policy drops, where the repeated
# nodes go, refusals.
check_PROGRAMS += tests/test_remat
TESTS += tests/test_remat
tests_test_remat_SOURCES = tests/test_remat.c
tests_test_remat_CFLAGS = $(TEST_CFLAGS)
tests_test_remat_LDADD = $(TEST_LDADD)
endif
