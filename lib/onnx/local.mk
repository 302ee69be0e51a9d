# onnx: the ONNX importer (clrun_graph_load_onnx), over graph. The protobuf parser is C that
# protoc-c generates at build time from Debian's onnx.proto (ONNX_PROTO, found by configure):
# never committed, never distributed.
ONNX_C_SOURCES = \
	lib/onnx/import.c \
	lib/onnx/values.c \
	lib/onnx/inputs.c \
	lib/onnx/emit.c \
	lib/onnx/attrs.c \
	lib/onnx/wire.c \
	lib/onnx/tensor.c \
	lib/onnx/tensor_file.c \
	lib/onnx/save.c \
	lib/onnx/ops.c \
	lib/onnx/host_eval.c \
	lib/onnx/host_eval_ops.c \
	lib/onnx/move.c \
	lib/onnx/map_elementwise.c \
	lib/onnx/map_shape.c \
	lib/onnx/map_index.c \
	lib/onnx/map_detect.c \
	lib/onnx/map_scatter.c \
	lib/onnx/map_data_shaped.c \
	lib/onnx/map_nn.c \
	lib/onnx/map_qlinear.c \
	lib/onnx/map_norm.c \
	lib/onnx/map_window3d.c \
	lib/onnx/map_reduce.c \
	lib/onnx/map_misc.c \
	lib/onnx/map_control.c \
	lib/onnx/map_extra.c \
	lib/onnx/map_einsum.c \
	lib/onnx/map_spectral.c \
	lib/onnx/map_vision.c \
	lib/onnx/map_opset18.c \
	lib/onnx/map_recurrent.c \
	lib/onnx/map_quant.c \
	lib/onnx/map_training.c
ONNX_SOURCES = $(ONNX_C_SOURCES) \
	lib/onnx/import.h \
	lib/onnx/wire.h \
	lib/onnx/tensor.h \
	lib/onnx/host_eval.h \
	lib/onnx/map.h
ONNX_GENERATED = lib/onnx/onnx.pb-c.c lib/onnx/onnx.pb-c.h

libclrun_internal_la_SOURCES += $(ONNX_SOURCES)
nodist_libclrun_internal_la_SOURCES += $(ONNX_GENERATED)
clruninclude_HEADERS += include/clrun/onnx.h
BUILT_SOURCES += $(ONNX_GENERATED)
CLEANFILES += $(ONNX_GENERATED)

# protoc-c writes both files; the header's rule only remakes them when it went missing alone.
lib/onnx/onnx.pb-c.c: $(ONNX_PROTO)
	$(AM_V_at)$(MKDIR_P) lib/onnx
	$(AM_V_GEN)$(PROTOC_C) --c_out=lib/onnx --proto_path=$(dir $(ONNX_PROTO)) $(ONNX_PROTO)
lib/onnx/onnx.pb-c.h: lib/onnx/onnx.pb-c.c
	@test -f $@ || { rm -f lib/onnx/onnx.pb-c.c; $(MAKE) $(AM_MAKEFLAGS) lib/onnx/onnx.pb-c.c; }

# A seed corpus for the fuzz target: small models of the ONNX test suite (libonnx-testdata).
EXTRA_DIST += docs/onnx.md tests/fuzz/fuzz_onnx.c \
	tests/fuzz/corpus/onnx/test_Conv2d.onnx \
	tests/fuzz/corpus/onnx/test_PReLU_2d.onnx \
	tests/fuzz/corpus/onnx/test_add.onnx \
	tests/fuzz/corpus/onnx/test_argmax_default_axis_example.onnx \
	tests/fuzz/corpus/onnx/test_averagepool_2d_ceil.onnx \
	tests/fuzz/corpus/onnx/test_batchnorm_example.onnx \
	tests/fuzz/corpus/onnx/test_cast_FLOAT_to_DOUBLE.onnx \
	tests/fuzz/corpus/onnx/test_clip.onnx \
	tests/fuzz/corpus/onnx/test_concat_1d_axis_0.onnx \
	tests/fuzz/corpus/onnx/test_constant.onnx \
	tests/fuzz/corpus/onnx/test_constantofshape_int_zeros.onnx \
	tests/fuzz/corpus/onnx/test_conv_with_strides_padding.onnx \
	tests/fuzz/corpus/onnx/test_convtranspose.onnx \
	tests/fuzz/corpus/onnx/test_cumsum_1d.onnx \
	tests/fuzz/corpus/onnx/test_depthtospace_example.onnx \
	tests/fuzz/corpus/onnx/test_dropout_default.onnx \
	tests/fuzz/corpus/onnx/test_expand_dim_changed.onnx \
	tests/fuzz/corpus/onnx/test_expand_shape_model1.onnx \
	tests/fuzz/corpus/onnx/test_flatten_axis0.onnx \
	tests/fuzz/corpus/onnx/test_gather_0.onnx \
	tests/fuzz/corpus/onnx/test_gemm_all_attributes.onnx \
	tests/fuzz/corpus/onnx/test_identity.onnx \
	tests/fuzz/corpus/onnx/test_layer_normalization_2d_axis0_expanded.onnx \
	tests/fuzz/corpus/onnx/test_matmul_2d.onnx \
	tests/fuzz/corpus/onnx/test_maxpool_2d_pads.onnx \
	tests/fuzz/corpus/onnx/test_operator_params.onnx \
	tests/fuzz/corpus/onnx/test_operator_view.onnx \
	tests/fuzz/corpus/onnx/test_pow.onnx \
	tests/fuzz/corpus/onnx/test_range_float_type_positive_delta_expanded.onnx \
	tests/fuzz/corpus/onnx/test_reduce_sum_keepdims_example.onnx \
	tests/fuzz/corpus/onnx/test_reshape_reordered_all_dims.onnx \
	tests/fuzz/corpus/onnx/test_resize_upsample_scales_nearest.onnx \
	tests/fuzz/corpus/onnx/test_shape_start_1.onnx \
	tests/fuzz/corpus/onnx/test_size.onnx \
	tests/fuzz/corpus/onnx/test_slice.onnx \
	tests/fuzz/corpus/onnx/test_softmax_axis_0.onnx \
	tests/fuzz/corpus/onnx/test_split_equal_parts_1d.onnx \
	tests/fuzz/corpus/onnx/test_squeeze.onnx \
	tests/fuzz/corpus/onnx/test_tile.onnx \
	tests/fuzz/corpus/onnx/test_transpose_default.onnx \
	tests/fuzz/corpus/onnx/test_triu.onnx \
	tests/fuzz/corpus/onnx/test_unsqueeze_axis_0.onnx \
	tests/fuzz/corpus/onnx/test_where_example.onnx

# The fuzz target compiles the importer into itself, instrumented (FUZZ_CFLAGS), with host
# tensors limited to 64 MiB so that libFuzzer's memory limit is never the finding; the generated
# parser and the library copies stay uninstrumented.
if HAVE_FUZZ
EXTRA_PROGRAMS += tests/fuzz/fuzz_onnx
FUZZ_LIST += tests/fuzz/fuzz_onnx
tests_fuzz_fuzz_onnx_SOURCES = tests/fuzz/fuzz_onnx.c $(ONNX_C_SOURCES)
tests_fuzz_fuzz_onnx_CPPFLAGS = $(AM_CPPFLAGS) -DCLRUN__ONNX_MAX_TENSOR_BYTES='((uint64_t)1 << 26)'
tests_fuzz_fuzz_onnx_CFLAGS = $(AM_CFLAGS) $(FUZZ_CFLAGS)
tests_fuzz_fuzz_onnx_LDFLAGS = $(FUZZ_CFLAGS)
tests_fuzz_fuzz_onnx_LDADD = libclrun-internal.la
endif

if HAVE_CMOCKA
check_PROGRAMS += tests/test_onnx
TESTS += tests/test_onnx
tests_test_onnx_SOURCES = tests/test_onnx.c tests/onnx_builder.h tests/graph_reference.c \
	tests/graph_reference.h
tests_test_onnx_CFLAGS = $(TEST_CFLAGS)
tests_test_onnx_LDADD = $(TEST_LDADD)

# NaN and signed zeros in Relu, Max, Min, Clip, LeakyRelu: the device (fused and unfused) and the
# host's folding at load give the same, ONNX's.
check_PROGRAMS += tests/test_onnx_nan
TESTS += tests/test_onnx_nan
tests_test_onnx_nan_SOURCES = tests/test_onnx_nan.c tests/onnx_builder.h
tests_test_onnx_nan_CFLAGS = $(TEST_CFLAGS)
tests_test_onnx_nan_LDADD = $(TEST_LDADD)

# Empty tensors (a dimension 0) fixed at load: MatMul with K = 0 or M = 0, Concat, Slice and
# reductions over nothing fold; run with every allocator and executor mode.
check_PROGRAMS += tests/test_onnx_empty
TESTS += tests/test_onnx_empty
tests_test_onnx_empty_SOURCES = tests/test_onnx_empty.c tests/onnx_builder.h
tests_test_onnx_empty_CFLAGS = $(TEST_CFLAGS)
tests_test_onnx_empty_LDADD = $(TEST_LDADD)

# ConvTranspose (1-D and 2-D, every attribute), lowered to matmul + col2im or not, against
# tests/op_reference.c.
check_PROGRAMS += tests/test_onnx_conv_transpose
TESTS += tests/test_onnx_conv_transpose
tests_test_onnx_conv_transpose_SOURCES = tests/test_onnx_conv_transpose.c tests/onnx_builder.h \
	tests/op_reference.c tests/op_reference.h tests/device_test.h tests/rng.h
tests_test_onnx_conv_transpose_CFLAGS = $(TEST_CFLAGS)
tests_test_onnx_conv_transpose_LDADD = $(TEST_LDADD) -lm

# Hostile attribute and shape values (overflow, infinities), on the device and folded; the
# sanitizer build turns any overflow left into a failure.
check_PROGRAMS += tests/test_onnx_overflow
TESTS += tests/test_onnx_overflow
tests_test_onnx_overflow_SOURCES = tests/test_onnx_overflow.c tests/onnx_builder.h tests/device_test.h
tests_test_onnx_overflow_CFLAGS = $(TEST_CFLAGS)
tests_test_onnx_overflow_LDADD = $(TEST_LDADD)
check_PROGRAMS += tests/test_onnx_files
TESTS += tests/test_onnx_files
tests_test_onnx_files_SOURCES = tests/test_onnx_files.c tests/onnx_builder.h
tests_test_onnx_files_CFLAGS = $(TEST_CFLAGS)
tests_test_onnx_files_LDADD = $(TEST_LDADD)
check_PROGRAMS += tests/test_onnx_names
TESTS += tests/test_onnx_names
tests_test_onnx_names_SOURCES = tests/test_onnx_names.c tests/onnx_builder.h
tests_test_onnx_names_CFLAGS = $(TEST_CFLAGS)
tests_test_onnx_names_LDADD = $(TEST_LDADD)
endif

# The conformance suite and the real models (tests/onnx_suite.sh, tests/onnx_models.sh): the
# CLI over the installed ONNX test cases and over models built at test time with python3-onnx.
AM_TESTS_ENVIRONMENT += ONNX_TESTDATA='$(ONNX_TESTDATA)'; export ONNX_TESTDATA; \
	ONNX_PYTHON='$(ONNX_PYTHON)'; export ONNX_PYTHON;
TESTS += tests/onnx_suite.sh tests/onnx_models.sh tests/cli_onnx.sh tests/cli_files.sh
EXTRA_DIST += tests/onnx_suite.sh tests/onnx_models.sh tests/onnx_models.py tests/cli_onnx.sh \
	tests/cli_files.sh

# Loading a 10 MB, 700-node model: import, folding, planning (measured, never asserted).
EXTRA_PROGRAMS += bench/bench_onnx_load
BENCH_LIST += bench/bench_onnx_load
bench_bench_onnx_load_SOURCES = bench/bench_onnx_load.c tests/onnx_builder.h
bench_bench_onnx_load_LDADD = libclrun-internal.la
