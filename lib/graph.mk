# Graphs: the builder and validation, the .graph text format, the example graphs and the model
# generators (paths relative to the top of the tree).
libclrun_internal_la_SOURCES += \
	lib/graph.c lib/graph.h \
	lib/graph_io.c
clruninclude_HEADERS += \
	include/clrun/graph.h

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

EXTRA_DIST += \
	examples/mlp.graph examples/gpt2_block.graph examples/resnet_block.graph
