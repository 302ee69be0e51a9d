# Benchmarks are built by 'make bench' and never run as tests: speed is measured, not asserted.
EXTRA_PROGRAMS += bench/bench_exec
BENCH_LIST += bench/bench_exec
bench_bench_exec_SOURCES = bench/bench_exec.c
bench_bench_exec_LDADD = libclrun-internal.la

EXTRA_PROGRAMS += bench/bench_models
BENCH_LIST += bench/bench_models
bench_bench_models_SOURCES = bench/bench_models.c
bench_bench_models_LDADD = libclrun-internal.la

# The C side of bench/bench_python.py: public API only, against the shared library.
EXTRA_PROGRAMS += bench/bench_call
BENCH_LIST += bench/bench_call
bench_bench_call_SOURCES = bench/bench_call.c
bench_bench_call_LDADD = libclrun.la
EXTRA_DIST += bench/bench_python.py

CLEANFILES += $(BENCH_LIST) $(FUZZ_LIST)

bench: $(BENCH_LIST)
	@echo "built: $(BENCH_LIST)"

fuzz: $(FUZZ_LIST)
	@echo "built: $(FUZZ_LIST)"

.PHONY: bench fuzz
