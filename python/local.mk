# The Python binding: a pure-Python package (python/clrun) over libclrun through ctypes,
# installed into the site-packages of the Python configure found (AM_PATH_PYTHON), and its
# tests, run by 'make check' from the build tree against the library just built.

CLRUN_PY_SOURCES = \
	python/clrun/__init__.py \
	python/clrun/_lib.py \
	python/clrun/errors.py \
	python/clrun/_context.py \
	python/clrun/_model.py \
	python/clrun/_pipeline.py \
	python/clrun/_data_parallel.py \
	python/clrun/_onnx.py \
	python/clrun/_train.py \
	python/clrun/_grad.py \
	python/clrun/mpi.py

if HAVE_PYTHON
clrunpydir = $(pythondir)/clrun
clrunpy_PYTHON = $(CLRUN_PY_SOURCES)

# Where the installed package finds the installed library: clrun/_paths.py, written at install
# time (so that 'make install prefix=...' and DESTDIR are right) from libdir and the library's
# soname (libtool's dlname).
install-data-hook: install-clrun-python-paths
uninstall-hook: uninstall-clrun-python-paths
install-clrun-python-paths:
	$(AM_V_at)$(MKDIR_P) '$(DESTDIR)$(clrunpydir)'
	$(AM_V_GEN)dlname=`sed -n "s/^dlname='\(.*\)'$$/\1/p" libclrun.la` && \
	{ echo '"""Where make install put libclrun (written by make install)."""'; \
	  echo "LIBRARY = '$(libdir)/$${dlname:-libclrun.so}'"; } > '$(DESTDIR)$(clrunpydir)/_paths.py'
uninstall-clrun-python-paths:
	-rm -f '$(DESTDIR)$(clrunpydir)/_paths.py'
else
EXTRA_DIST += $(CLRUN_PY_SOURCES)
endif
.PHONY: install-clrun-python-paths uninstall-clrun-python-paths

# Each test is a unittest module run by tests/python/run.sh, which sets up the environment and
# skips (with a line saying why) only when there is no Python with numpy or no shared library.
CLRUN_PY_TESTS = \
	tests/python/test_api.py \
	tests/python/test_ops.py \
	tests/python/test_cli_equal.py \
	tests/python/test_donation.py \
	tests/python/test_errors.py \
	tests/python/test_leak.py \
	tests/python/test_example.py \
	tests/python/test_onnx_dims.py \
	tests/python/test_threads.py \
	tests/python/test_mistakes.py \
	tests/python/test_onnx_constants.py \
	tests/python/test_onnx_empty.py \
	tests/python/test_budget.py \
	tests/python/test_pipeline.py \
	tests/python/test_data_parallel.py \
	tests/python/test_train.py \
	tests/python/test_grad.py \
	tests/python/test_install.py
TESTS += $(CLRUN_PY_TESTS)
TEST_EXTENSIONS = .py
PY_LOG_COMPILER = env PYTHON='$(PYTHON)' CLRUN_HAVE_NUMPY='$(CLRUN_HAVE_NUMPY)' CC='$(CC)' \
	SANITIZER_CFLAGS='$(SANITIZER_CFLAGS)' top_builddir='$(abs_top_builddir)' \
	top_srcdir='$(abs_top_srcdir)' $(SHELL) $(top_srcdir)/tests/python/run.sh
EXTRA_DIST += $(CLRUN_PY_TESTS) tests/python/run.sh tests/python/support.py pyproject.toml \
	setup.py

# bench/bench_python.py: the binding's call overhead against the same calls from C, made by
# bench/bench_call.c, a module of the public API loaded into the benchmark's own process and
# linked against the shared library the binding loads. Built by 'make bench', never installed.
EXTRA_LTLIBRARIES = bench/libbench_call.la
BENCH_LIST += bench/libbench_call.la
bench_libbench_call_la_SOURCES = bench/bench_call.c
bench_libbench_call_la_LDFLAGS = -module -avoid-version -rpath '$(abs_builddir)/bench'
bench_libbench_call_la_LIBADD = libclrun.la
EXTRA_DIST += bench/bench_python.py
