# Graphs: the builder and validation, the .graph text format, the example graphs and the model
# generators (paths relative to the top of the tree).
libclrun_internal_la_SOURCES += \
	lib/graph/types.c lib/graph/types.h \
	lib/graph/op.c lib/graph/op.h lib/graph/op_families.h lib/graph/op_geometry.h \
	lib/graph/elementwise.h lib/graph/infer_elementwise.c \
	lib/graph/infer_matmul.c \
	lib/graph/infer_norm.c \
	lib/graph/infer_layout.c \
	lib/graph/infer_slice.c lib/graph/layout_view.c lib/graph/layout_geometry.h \
	lib/graph/infer_index.c lib/graph/dropout_mask.c lib/graph/dropout_mask.h \
	lib/graph/infer_resize.c \
	lib/graph/infer_scatter.c \
	lib/graph/infer_sample.c \
	lib/graph/infer_detect.c \
	lib/graph/infer_transfer.c \
	lib/graph/infer_loop.c \
	lib/graph/offload.c lib/graph/offload.h \
	lib/graph/infer_conv.c lib/graph/conv_lower.c lib/graph/conv_lower.h \
	lib/graph/infer_qlinear.c lib/graph/qlinear_geometry.h \
	lib/graph/graph.c lib/graph/graph.h \
	lib/graph/split.c lib/graph/split.h \
	lib/graph/graph_inputs.c \
	lib/graph/names.c \
	lib/graph/validate.c \
	lib/graph/fill.c \
	lib/graph/weights.c \
	lib/graph/compare.c \
	lib/graph/graph_read.h \
	lib/graph/graph_lex.c \
	lib/graph/graph_parse.c \
	lib/graph/graph_build.c \
	lib/graph/graph_write.c
clruninclude_HEADERS += \
	include/clrun/graph.h \
	include/clrun/weights.h

# The model generators: gen_models MODEL BATCH [OUT.graph]; 'make examples' writes them all.
noinst_PROGRAMS += examples/gen_models
examples_gen_models_SOURCES = examples/gen_models.c examples/models.c examples/models.h
examples_gen_models_LDADD = libclrun-internal.la

GRAPH_EXAMPLE_MODELS = resnet50 mobilenetv2 bert-base gpt2
GRAPH_EXAMPLE_BATCHES = 1 8

.PHONY: examples
examples: examples/gen_models$(EXEEXT)
	$(AM_V_at)$(MKDIR_P) examples/generated
	$(AM_V_GEN)for model in $(GRAPH_EXAMPLE_MODELS); do \
	  for batch in $(GRAPH_EXAMPLE_BATCHES); do \
	    ./examples/gen_models$(EXEEXT) $$model $$batch examples/generated/$$model-b$$batch.graph || exit 1; \
	  done; \
	done

clean-local: clean-graph-examples
.PHONY: clean-graph-examples
clean-graph-examples:
	-rm -rf examples/generated

# The malformed-graph corpus: each NAME.graph with its exact message in NAME.expected.
GRAPH_BAD_CASES = \
	attr_float_not_finite attr_list_long attr_twice bad_dim_float bad_dim_negative \
	bad_node_over_empty bad_fill_normal_std bad_fill_uniform_range bad_seed_negative cycle cycle_self \
	data_count data_not_int dims_too_many donated_typo dtype_unknown empty_file f16_data_bits \
	fill_unknown graph_header_late graph_header_twice infer_refused input_count missing_colon \
	name_too_long no_outputs number_range op_unknown output_never_produced output_not_a_name \
	output_twice produced_twice redefined seed_on_zeros statement_unknown tensor_undefined \
	too_large type_annotation unexpected_char unterminated_call
EXTRA_DIST += \
	docs/graph-format.md \
	examples/mlp.graph examples/gpt2_block.graph examples/resnet_block.graph \
	$(GRAPH_BAD_CASES:%=tests/data/graphs/bad/%.graph) \
	$(GRAPH_BAD_CASES:%=tests/data/graphs/bad/%.expected) \
	tests/fuzz/corpus/graph/mlp tests/fuzz/corpus/graph/multi tests/fuzz/corpus/graph/data \
	tests/fuzz/corpus/graph/forward tests/fuzz/corpus/graph/cycle tests/fuzz/corpus/graph/junk \
	tests/fuzz/graph.dict

if HAVE_CMOCKA
check_PROGRAMS += tests/test_graph
TESTS += tests/test_graph
tests_test_graph_SOURCES = tests/test_graph.c examples/models.c examples/models.h
tests_test_graph_CPPFLAGS = $(AM_CPPFLAGS) -DCLRUN_TOP_SRCDIR='"$(abs_top_srcdir)"'
tests_test_graph_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_graph_LDADD = libclrun-internal.la $(CMOCKA_LIBS)

check_PROGRAMS += tests/test_graph_inputs
TESTS += tests/test_graph_inputs
tests_test_graph_inputs_SOURCES = tests/test_graph_inputs.c
tests_test_graph_inputs_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_graph_inputs_LDADD = libclrun-internal.la $(CMOCKA_LIBS)
endif

# The graph sources are compiled into the target itself so that libFuzzer's coverage
# instrumentation (FUZZ_CFLAGS) reaches the parser and builder; the library copies stay unused.
if HAVE_FUZZ
EXTRA_PROGRAMS += tests/fuzz/fuzz_graph
FUZZ_LIST += tests/fuzz/fuzz_graph
tests_fuzz_fuzz_graph_SOURCES = tests/fuzz/fuzz_graph.c lib/graph/graph.c lib/graph/names.c \
	lib/graph/validate.c lib/graph/fill.c lib/graph/graph_lex.c lib/graph/graph_parse.c \
	lib/graph/graph_build.c lib/graph/graph_write.c
tests_fuzz_fuzz_graph_CFLAGS = $(AM_CFLAGS) $(FUZZ_CFLAGS)
tests_fuzz_fuzz_graph_LDFLAGS = $(FUZZ_CFLAGS)
tests_fuzz_fuzz_graph_LDADD = libclrun-internal.la
endif

# .npy files (include/clrun/npy.h): real inputs and outputs for the CLI and the bindings.
libclrun_internal_la_SOURCES += lib/graph/npy.c
clruninclude_HEADERS += include/clrun/npy.h
EXTRA_DIST += docs/npy.md
