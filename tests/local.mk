# What every test shares; each area's local.mk lists its own tests and benchmarks.
# LeakSanitizer of clang 14 crashes at exit reading the dynamic TLS of libraries POCL loads
# ("Tracer caught signal 11", a bogus DTLS range) under Debian 12's glibc: it does not track
# __tls_get_addr here; static TLS and everything else are still scanned.
# use_sigaltstack=0: the LLVM inside POCL gives the thread that first builds a program an
# alternate signal stack of its own (malloc'd); AddressSanitizer unmaps a thread's alternate
# stack when the thread ends, and that munmap of LLVM's heap block fails (EINVAL) and aborts
# every test that creates a context on a thread of its own (test_threads).
# CLRUN_OFFLOAD_RATE fixed: which tensors a budget offloads must not depend on the machine's
# load (a measured rate, the default); tests/test_exec_offload.c tests the measurement.
# CLRUN_CACHE_BUDGET 0: a test process never cuts kernels out or writes POCL binaries (the suite
# shares one cache directory in CI, and each later process would spend up to the budget on it);
# tests/cli_cache.sh and tests/test_context.c set their own to test those writes.
AM_TESTS_ENVIRONMENT = LSAN_OPTIONS="suppressions=$(abs_top_srcdir)/tests/lsan.supp:print_suppressions=0" ; export LSAN_OPTIONS ; \
	ASAN_OPTIONS="intercept_tls_get_addr=0:use_sigaltstack=0$${ASAN_OPTIONS:+:$$ASAN_OPTIONS}" ; export ASAN_OPTIONS ; \
	CXX="$(CXX)" ; OPENCL_CFLAGS="$(OPENCL_CFLAGS)" ; export CXX OPENCL_CFLAGS ; \
	CLRUN_TEST_CC="$(CC)" ; SANITIZER_CFLAGS="$(SANITIZER_CFLAGS)" ; export CLRUN_TEST_CC SANITIZER_CFLAGS ; \
	HAVE_MPI="$(have_mpi)" ; MPIRUN="$(MPIRUN)" ; MPI_CFLAGS="$(MPI_CFLAGS)" ; \
	export HAVE_MPI MPIRUN MPI_CFLAGS ; \
	CLRUN_OFFLOAD_RATE="$${CLRUN_OFFLOAD_RATE:-10}" ; export CLRUN_OFFLOAD_RATE ; \
	CLRUN_CACHE_BUDGET="$${CLRUN_CACHE_BUDGET:-0}" ; export CLRUN_CACHE_BUDGET ;
EXTRA_DIST += tests/lsan.supp tests/device_test.h

if HAVE_CMOCKA
TEST_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
TEST_LDADD = libclrun-internal.la $(CMOCKA_LIBS)
endif

# After `make install`: a client built with nothing but pkg-config (warnings are errors, so the
# OpenCL target version must come with the flags) enqueues its own kernel on clrun's queue; with
# MPI, tests/test_mpi.c builds with nothing but pkg-config's clrun-mpi (run by tests/mpi_train.sh).
EXTRA_DIST += tests/client/enqueue.c
installcheck-local:
	@PKG_CONFIG_PATH="$(DESTDIR)$(libdir)/pkgconfig" ; export PKG_CONFIG_PATH ; \
	flags=`$(PKG_CONFIG) --define-variable=prefix="$(DESTDIR)$(prefix)" --cflags --libs clrun` && \
	$(CC) -std=c11 -Wall -Wextra -Werror -o installcheck-client $(srcdir)/tests/client/enqueue.c $$flags && \
	LD_LIBRARY_PATH="$(DESTDIR)$(libdir)" POCL_DEVICES=pthread ./installcheck-client && \
	rm -f installcheck-client
	@if test "$(have_mpi)" = yes; then \
	PKG_CONFIG_PATH="$(DESTDIR)$(libdir)/pkgconfig" ; export PKG_CONFIG_PATH ; \
	flags=`$(PKG_CONFIG) --define-variable=prefix="$(DESTDIR)$(prefix)" --cflags --libs clrun-mpi` && \
	$(CC) -std=c11 -Wall -Wextra -Werror -o installcheck-mpi-client $(srcdir)/tests/test_mpi.c $$flags -lm && \
	rm -f installcheck-mpi-client; fi

# The include rule (areas depend one way; pure code has no OpenCL; the CLI uses only the public
# API): tests/check-includes.sh names every include against it.
TESTS += tests/check-includes.sh
EXTRA_DIST += tests/check-includes.sh

# Every public header compiles as C++ (g++ -std=c++11 -Wall -Wextra -Werror), each alone and
# the umbrella; skipped without a C++ compiler.
TESTS += tests/check-cxx.sh
EXTRA_DIST += tests/check-cxx.sh

# What the CLI test scripts share (sourced by them, not a test of its own).
EXTRA_DIST += tests/cli_common.sh tests/cli_mpi_common.sh tests/train_digits.py

# The device tests under oclgrind (invalid accesses, data races, API errors): opt-in, being
# slow (CLRUN_OCLGRIND=1); skipped otherwise and when oclgrind is not installed.
TESTS += tests/oclgrind.sh
EXTRA_DIST += tests/oclgrind.sh

# The ops training needs beside the gradient transform (softmax_xent and its gradient,
# gather_grad, dropout) on a real device, against tests/op_reference.c.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_ops_grad_index
TESTS += tests/test_ops_grad_index
tests_test_ops_grad_index_SOURCES = tests/test_ops_grad_index.c tests/op_reference.c \
	tests/op_reference.h tests/device_test.h tests/op_args.h tests/rng.h
tests_test_ops_grad_index_CFLAGS = $(TEST_CFLAGS)
tests_test_ops_grad_index_LDADD = $(TEST_LDADD) -lm
endif

if HAVE_CMOCKA
check_PROGRAMS += tests/test_ops_scatter
TESTS += tests/test_ops_scatter
tests_test_ops_scatter_SOURCES = tests/test_ops_scatter.c tests/op_reference.c \
	tests/op_reference.h tests/device_test.h tests/op_args.h tests/rng.h
tests_test_ops_scatter_CFLAGS = $(TEST_CFLAGS)
tests_test_ops_scatter_LDADD = $(TEST_LDADD) -lm
endif

# The double-precision graph reference of the gradient tests (tests/graph_reference.{c,h}),
# held to the device on every op it supports, and its finite differences to known gradients.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_graph_reference
TESTS += tests/test_graph_reference
tests_test_graph_reference_SOURCES = tests/test_graph_reference.c tests/graph_reference.c \
	tests/graph_reference.h tests/graph_case.h tests/device_test.h tests/rng.h
tests_test_graph_reference_CFLAGS = $(TEST_CFLAGS)
tests_test_graph_reference_LDADD = $(TEST_LDADD)
endif

# RNN, GRU and LSTM unrolled at load, against a numpy reference of the spec and against
# PyTorch's own outputs for models torch.onnx.export writes (skipped without python3-onnx;
# the torch cases without torch).
TESTS += tests/onnx_recurrent.sh
EXTRA_DIST += tests/onnx_recurrent.sh tests/onnx_recurrent.py
# NonMaxSuppression (on the device with a fixed capacity, and at load), MaxPool's Indices and
# MaxUnpool against numpy; a detection head with NMS exported by torch against torch.
TESTS += tests/onnx_detect.sh
EXTRA_DIST += tests/onnx_detect.sh tests/onnx_detect.py
# If with a condition fed at run time (guarded branches, nested, a skipped branch that would
# fail), Scan and Loop unrolled at load: against numpy, under every allocator, fusion off. Loop
# with its trip count and condition fed at run time (onnx_loop): the same, and against --const.
TESTS += tests/onnx_control.sh tests/onnx_loop.sh tests/onnx_scan.sh
EXTRA_DIST += tests/onnx_control.sh tests/onnx_control.py tests/onnx_loop.sh tests/onnx_loop.py \
	tests/onnx_scan.sh tests/onnx_scan.py
# Opsets 18 to 21: each changed or added operator at its new opset against a numpy reference of
# the spec, and what clrun does not do there (and opset 22) refused by name.
TESTS += tests/onnx_opset18.sh
EXTRA_DIST += tests/onnx_opset18.sh tests/onnx_opset18.py
# Empty tensors at run time: an empty graph input fed as an empty .npy, empty intermediates and
# outputs, against numpy in every allocator mode and with fusion off.
TESTS += tests/onnx_empty.sh
EXTRA_DIST += tests/onnx_empty.sh tests/onnx_empty.py
TESTS += tests/onnx_empty_ops.sh
EXTRA_DIST += tests/onnx_empty_ops.sh tests/onnx_empty_ops.py
# shared by the budget and offload tests
EXTRA_DIST += tests/data/graphs/skip.graph tests/data/graphs/two_skips.graph \
	tests/data/graphs/wide_skip.graph
# DFT and STFT against numpy.fft
TESTS += tests/onnx_spectral.sh
EXTRA_DIST += tests/onnx_spectral.sh tests/onnx_spectral.py
TESTS += tests/onnx_window3d.sh
EXTRA_DIST += tests/onnx_window3d.sh tests/onnx_window3d.py
EXTRA_DIST += tests/onnx_common.py
TESTS += tests/onnx_bitwise_lppool.sh
EXTRA_DIST += tests/onnx_bitwise_lppool.sh tests/onnx_bitwise_lppool.py
TESTS += tests/onnx_bf16.sh
EXTRA_DIST += tests/onnx_bf16.sh tests/onnx_bf16.py
TESTS += tests/onnx_qdq.sh
TESTS += tests/onnx_qop.sh
EXTRA_DIST += tests/onnx_qdq.sh tests/onnx_qdq.py
EXTRA_DIST += tests/onnx_qop.sh tests/onnx_qop.py
# matmul_integer and conv_integer on a real device, against tests/op_reference.c.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_ops_qlinear
TESTS += tests/test_ops_qlinear
tests_test_ops_qlinear_SOURCES = tests/test_ops_qlinear.c tests/op_reference.c \
	tests/op_reference.h tests/device_test.h tests/op_args.h tests/rng.h
tests_test_ops_qlinear_CFLAGS = $(TEST_CFLAGS)
tests_test_ops_qlinear_LDADD = $(TEST_LDADD) -lm
endif

# clrun train under mpirun -np 2 and 3 against one process, and a rank stopped or killed mid-run
# (skipped when configure found no MPI).
TESTS += tests/cli_train_mpi.sh
EXTRA_DIST += tests/cli_train_mpi.sh
# clrun train --devices: data parallel over 2 and 3 POCL devices of one process against one.
TESTS += tests/cli_train_devices.sh
EXTRA_DIST += tests/cli_train_devices.sh
# --devices --deterministic: 2 devices, 3 shares (and mpirun -np 2) save one process's bytes.
TESTS += tests/cli_train_devices_det.sh
EXTRA_DIST += tests/cli_train_devices_det.sh
# --deterministic: 1, 2 and 3 ranks save the same bytes (skipped without MPI).
TESTS += tests/cli_train_mpi_det.sh
EXTRA_DIST += tests/cli_train_mpi_det.sh
# --deterministic's fixed-order sum (tools/det_sum.c), pure: any share of the chunks between
# ranks gives the tree's sum bit for bit.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_det_sum
TESTS += tests/test_det_sum
tests_test_det_sum_SOURCES = tests/test_det_sum.c tools/det_sum.c tools/det_sum.h
tests_test_det_sum_CFLAGS = $(TEST_CFLAGS)
tests_test_det_sum_LDADD = libclrun.la $(OPENCL_LIBS) $(CMOCKA_LIBS)
endif

# CLRUN_PIN_THREADS (tools/pin_threads.c), pure: its values, and POCL_AFFINITY set only where
# POCL's pinning can succeed and no choice was made.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_pin_threads
TESTS += tests/test_pin_threads
tests_test_pin_threads_SOURCES = tests/test_pin_threads.c tools/pin_threads.c tools/pin_threads.h
tests_test_pin_threads_CFLAGS = $(TEST_CFLAGS)
tests_test_pin_threads_LDADD = $(CMOCKA_LIBS)
endif

# Pipeline split: the cut (pure, no device) and the stages run on two POCL devices.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_split tests/test_pipeline
TESTS += tests/test_split tests/test_pipeline
tests_test_split_SOURCES = tests/test_split.c
tests_test_split_CFLAGS = $(TEST_CFLAGS)
tests_test_split_LDADD = $(TEST_LDADD)
tests_test_pipeline_SOURCES = tests/test_pipeline.c tests/device_test.h
tests_test_pipeline_CFLAGS = $(TEST_CFLAGS)
tests_test_pipeline_LDADD = $(TEST_LDADD)
endif

# Data-parallel inference (clrun/run_parallel.h) on two POCL devices: the bits of one device.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_run_parallel
TESTS += tests/test_run_parallel
tests_test_run_parallel_SOURCES = tests/test_run_parallel.c tests/device_test.h bench/models.c \
	bench/models.h
tests_test_run_parallel_CFLAGS = $(TEST_CFLAGS)
tests_test_run_parallel_LDADD = $(TEST_LDADD)
endif
# clrun run --devices --data-parallel: the output files of one device, byte for byte.
TESTS += tests/cli_run_parallel.sh
EXTRA_DIST += tests/cli_run_parallel.sh
