# The clrun CLI: one file per command.
bin_PROGRAMS += clrun
clrun_SOURCES = tools/clrun.c tools/cli.h tools/cmd_info.c tools/cmd_smoke.c tools/cmd_run.c \
	tools/run.h tools/run_report.c tools/run_trace.c tools/progress.c tools/progress.h \
	tools/cmd_replay.c tools/cmd_plan.c tools/cmd_plan.h \
	tools/cmd_onnx_test.c tools/model_io.c tools/model_io.h tools/cmd_train.c tools/cmd_grad.c \
	tools/model_bind.c tools/model_bind.h tools/run_pipeline.c tools/run_data_parallel.c \
	tools/train_devices.c tools/train_devices.h tools/pin_threads.c tools/pin_threads.h
clrun_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS) $(XXHASH_CFLAGS)
# The CLI is a client of the public API: it links the installed library, as users do.
clrun_LDADD = libclrun.la $(OPENCL_LIBS) $(JSONC_LIBS) $(XXHASH_LIBS)
# Data-parallel training (tools/dist.h): over Open MPI where configure found it, through
# libclrun-mpi (lib/mpi); libclrun stays free of MPI.
if HAVE_MPI
clrun_SOURCES += tools/dist.h tools/det_sum.h tools/det_sum.c tools/dist_mpi.c
clrun_CFLAGS += $(MPI_CFLAGS)
clrun_LDADD += libclrun-mpi.la $(MPI_LIBS)
else
clrun_SOURCES += tools/dist.h tools/det_sum.h tools/det_sum.c tools/dist_none.c
endif
EXTRA_DIST += tools/dist_mpi.c tools/dist_none.c

# Run from the build directory by the test harness, which exports srcdir; CLRUN_BIN overrides
# the tool's path.
TESTS += tests/cli_replay.sh tests/cli_run.sh tests/cli_oom.sh tests/cli_pipeline.sh
# The kernel binary cache across processes: per-kernel programs, markers, damaged entries.
TESTS += tests/cli_cache.sh
EXTRA_DIST += tests/cli_cache.sh
# clrun onnx-test on folders without a case: an error, before any work.
TESTS += tests/cli_onnx_test_empty.sh
EXTRA_DIST += tests/cli_onnx_test_empty.sh
EXTRA_DIST += tests/cli_replay.sh tests/cli_run.sh tests/cli_oom.sh tests/cli_pipeline.sh \
	tests/data/traces/gen_traces.py \
	tests/data/traces/tiny.csv \
	tests/data/traces/malformed.csv \
	tests/data/traces/resnet50_train.csv \
	tests/data/traces/resnet50_infer.csv \
	tests/data/traces/growing.csv \
	tests/data/traces/random.csv

# The LD_PRELOAD library of tests/cli_oom.sh: fails the Nth allocation of a process.
check_LTLIBRARIES = tests/malloc_fail.la
tests_malloc_fail_la_SOURCES = tests/malloc_fail.c
tests_malloc_fail_la_CFLAGS = $(CLRUN_WARN_CFLAGS)
tests_malloc_fail_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
