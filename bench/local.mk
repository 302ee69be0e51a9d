# Benchmarks are built by 'make bench' and never run as tests: speed is measured, not asserted.
CLEANFILES += $(BENCH_LIST) $(FUZZ_LIST)

bench: $(BENCH_LIST)
	@echo "built: $(BENCH_LIST)"

fuzz: $(FUZZ_LIST)
	@echo "built: $(FUZZ_LIST)"

.PHONY: bench fuzz
