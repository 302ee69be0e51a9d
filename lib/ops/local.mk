# Ops: the op table the executor runs (lib/ops/*.c) and their kernels (kernels/*.cl).
libclrun_internal_la_SOURCES += \
	lib/ops/ops.c lib/ops/ops.h lib/ops/ops_internal.h \
	lib/ops/ew_source.c lib/ops/ew_source.h \
	lib/ops/ops_elementwise.c \
	lib/ops/fused.h lib/ops/ops_fused.c \
	lib/ops/ops_matmul.c lib/ops/matmul_core.c lib/ops/matmul_core.h \
	lib/ops/ops_norm.c \
	lib/ops/ops_layout.c lib/ops/ops_data.h \
	lib/ops/ops_index.c lib/ops/ops_index.h \
	lib/ops/ops_scatter.c \
	lib/ops/ops_resize.c \
	lib/ops/ops_conv.c \
	lib/ops/ops_conv_grad.c \
	lib/ops/ops_col2im.c \
	lib/ops/ops_sample.c \
	lib/ops/ops_detect.c \
	lib/ops/ops_transfer.c \
	lib/ops/ops_loop.c

CLRUN_KERNEL_FILES += \
	kernels/elementwise.cl \
	kernels/ew_functions.cl \
	kernels/matmul.cl \
	kernels/matmul_core.cl \
	kernels/norm.cl \
	kernels/reduce.cl \
	kernels/layout.cl \
	kernels/index.cl \
	kernels/scatter.cl \
	kernels/resize.cl \
	kernels/conv.cl \
	kernels/conv_grad.cl \
	kernels/col2im.cl \
	kernels/sample.cl \
	kernels/detect.cl \
	kernels/scan.cl

# The integer products (matmul_integer, conv_integer).
libclrun_internal_la_SOURCES += lib/ops/ops_qlinear.c
CLRUN_KERNEL_FILES += kernels/qlinear.cl

EXTRA_DIST += docs/ops.md docs/adding-an-op.md

if HAVE_CMOCKA
check_PROGRAMS += tests/test_ops
TESTS += tests/test_ops
tests_test_ops_SOURCES = tests/test_ops.c tests/op_reference.c tests/op_reference.h \
	tests/device_test.h tests/node_memory.h tests/rng.h tests/op_args.h
tests_test_ops_CPPFLAGS = $(AM_CPPFLAGS) -DCLRUN_TOP_SRCDIR='"$(abs_top_srcdir)"'
tests_test_ops_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_ops_LDADD = libclrun-internal.la $(CMOCKA_LIBS)

check_PROGRAMS += tests/test_ops_kernels
TESTS += tests/test_ops_kernels
tests_test_ops_kernels_SOURCES = tests/test_ops_kernels.c tests/device_test.h tests/node_memory.h tests/op_args.h \
	tests/rng.h
tests_test_ops_kernels_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_ops_kernels_LDADD = libclrun-internal.la $(CMOCKA_LIBS)
endif

if HAVE_CMOCKA
check_PROGRAMS += tests/test_ops_layout
TESTS += tests/test_ops_layout
tests_test_ops_layout_SOURCES = tests/test_ops_layout.c tests/layout_reference.c \
	tests/layout_reference.h tests/device_test.h tests/rng.h tests/op_args.h
tests_test_ops_layout_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_ops_layout_LDADD = libclrun-internal.la $(CMOCKA_LIBS) -lm
endif

# bench_conv_lower: ConvTranspose direct against its matmul + col2im lowering, and a wide
# Conv1d against the same product as a matmul, alternating in one run.
EXTRA_PROGRAMS += bench/bench_conv_lower
BENCH_LIST += bench/bench_conv_lower
bench_bench_conv_lower_SOURCES = bench/bench_conv_lower.c bench/timing.h tests/onnx_builder.h
bench_bench_conv_lower_LDADD = libclrun-internal.la

EXTRA_PROGRAMS += bench/bench_kernels
BENCH_LIST += bench/bench_kernels
bench_bench_kernels_SOURCES = bench/bench_kernels.c tests/node_memory.h
bench_bench_kernels_LDADD = libclrun-internal.la

if HAVE_CMOCKA
check_PROGRAMS += tests/test_ops_elementwise
TESTS += tests/test_ops_elementwise
tests_test_ops_elementwise_SOURCES = tests/test_ops_elementwise.c tests/device_test.h tests/rng.h
tests_test_ops_elementwise_CFLAGS = $(TEST_CFLAGS)
tests_test_ops_elementwise_LDADD = $(TEST_LDADD)
endif

if HAVE_CMOCKA
check_PROGRAMS += tests/test_ops_grad_conv
TESTS += tests/test_ops_grad_conv
tests_test_ops_grad_conv_SOURCES = tests/test_ops_grad_conv.c tests/op_reference.c \
	tests/op_reference.h tests/device_test.h tests/rng.h tests/op_args.h
tests_test_ops_grad_conv_CFLAGS = $(TEST_CFLAGS)
tests_test_ops_grad_conv_LDADD = $(TEST_LDADD) -lm
endif

if HAVE_CMOCKA
check_PROGRAMS += tests/test_ops_col2im
TESTS += tests/test_ops_col2im
tests_test_ops_col2im_SOURCES = tests/test_ops_col2im.c tests/op_reference.c \
	tests/op_reference.h tests/device_test.h tests/rng.h tests/op_args.h
tests_test_ops_col2im_CFLAGS = $(TEST_CFLAGS)
tests_test_ops_col2im_LDADD = $(TEST_LDADD) -lm
endif

if HAVE_CMOCKA
check_PROGRAMS += tests/test_ops_sample
TESTS += tests/test_ops_sample
tests_test_ops_sample_SOURCES = tests/test_ops_sample.c tests/op_reference.c \
	tests/op_reference.h tests/device_test.h tests/rng.h tests/op_args.h
tests_test_ops_sample_CFLAGS = $(TEST_CFLAGS)
tests_test_ops_sample_LDADD = $(TEST_LDADD) -lm
endif

if HAVE_CMOCKA
check_PROGRAMS += tests/test_ops_detect
TESTS += tests/test_ops_detect
tests_test_ops_detect_SOURCES = tests/test_ops_detect.c tests/device_test.h tests/rng.h tests/op_args.h
tests_test_ops_detect_CFLAGS = $(TEST_CFLAGS)
tests_test_ops_detect_LDADD = $(TEST_LDADD) -lm
endif

check_PROGRAMS += tests/test_narrow_weights
TESTS += tests/test_narrow_weights
tests_test_narrow_weights_SOURCES = tests/test_narrow_weights.c tests/device_test.h
tests_test_narrow_weights_CFLAGS = $(TEST_CFLAGS)
tests_test_narrow_weights_LDADD = $(TEST_LDADD)
