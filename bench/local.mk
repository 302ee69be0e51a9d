# 'make bench' and 'make fuzz': the benchmarks and libFuzzer targets that the areas list in
# BENCH_LIST and FUZZ_LIST, built on request only, never run as tests.
EXTRA_DIST += bench/bench_cache.sh bench/bench_dist.sh
# The median and the --repeat argument of the timing benchmarks (included by them).
EXTRA_DIST += bench/timing.h
CLEANFILES += $(BENCH_LIST) $(FUZZ_LIST)

bench: $(BENCH_LIST)
	@echo "built: $(BENCH_LIST)"

fuzz: $(FUZZ_LIST)
	@echo "built: $(FUZZ_LIST)"

.PHONY: bench fuzz

# Whole models against onnxruntime (bench/bench_models_ort.sh, run by hand: it needs
# onnxruntime-node installed outside the tree).
EXTRA_DIST += bench/bench_models_ort.sh bench/graph_to_onnx.py bench/ort_time.js

# Real architectures exported from PyTorch at bench time against onnxruntime, steady state and
# cold start (bench/bench_ort_models.sh, issue 26; run by hand like the one above).
EXTRA_DIST += bench/bench_ort_models.sh bench/ort_models.py bench/ort_models.js

# Weights stored as f16 or int8 against f32 (bench/bench_weights.sh, run by hand
# from the built tree).
EXTRA_DIST += bench/bench_weights.sh

# One train step of clrun against PyTorch on the CPU (bench/bench_train_torch.py, run by it
# with /usr/bin/python3 unless --python says otherwise).
EXTRA_PROGRAMS += bench/bench_train
BENCH_LIST += bench/bench_train
bench_bench_train_SOURCES = bench/bench_train.c bench/models.c bench/models.h bench/timing.h
bench_bench_train_CPPFLAGS = $(AM_CPPFLAGS) -DBENCH_SRCDIR='"$(abs_top_srcdir)"'
bench_bench_train_LDADD = libclrun-internal.la -lm
EXTRA_DIST += bench/bench_train_torch.py

# Train steps under rematerialisation policies and memory budgets (issue 27); PyTorch's
# checkpoint_sequential by bench/bench_remat_torch.py where torch is installed.
EXTRA_PROGRAMS += bench/bench_remat
BENCH_LIST += bench/bench_remat
bench_bench_remat_SOURCES = bench/bench_remat.c bench/models.c bench/models.h bench/timing.h
bench_bench_remat_CPPFLAGS = $(AM_CPPFLAGS) -DBENCH_SRCDIR='"$(abs_top_srcdir)"'
bench_bench_remat_LDADD = libclrun-internal.la -lm
EXTRA_DIST += bench/bench_remat_torch.py
