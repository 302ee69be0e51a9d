#!/bin/sh
# Runs one test module of the Python binding against the library in the build tree:
#   run.sh tests/python/test_x.py
# with PYTHON, top_builddir and top_srcdir from make (python/local.mk). Exit 77 (SKIP), with a
# line saying why, only when configure found no Python with numpy or no shared library exists.
set -u
test_file=$1
if [ -z "${PYTHON:-}" ] || [ "$PYTHON" = ":" ] || [ "${CLRUN_HAVE_NUMPY:-no}" != yes ]; then
    echo "SKIP: no Python 3 with numpy (found: ${PYTHON:-none}); apt-get install python3-numpy," \
         "or ./configure PYTHON=/path/to/python3"
    exit 77
fi
dlname=$(sed -n "s/^dlname='\(.*\)'$/\1/p" "$top_builddir/libclrun.la")
if [ -z "$dlname" ] || [ ! -f "$top_builddir/.libs/$dlname" ]; then
    echo "SKIP: libclrun was built without a shared library (configure --disable-shared?)"
    exit 77
fi
CLRUN_LIBRARY="$top_builddir/.libs/$dlname"
# A sanitized library needs its runtime loaded first into a Python that was not built with it.
case "${SANITIZER_CFLAGS:-}" in
*-fsanitize=address*)
    runtime=$($CC -print-file-name=libclang_rt.asan-x86_64.so 2>/dev/null)
    [ -f "$runtime" ] || runtime=$($CC -print-file-name=libasan.so 2>/dev/null)
    CLRUN_TEST_TOOL_PRELOAD=${LD_PRELOAD:-} # what the CLI, linked with its own runtime, gets
    LD_PRELOAD="$runtime${LD_PRELOAD:+ $LD_PRELOAD}"
    ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
    export LD_PRELOAD ASAN_OPTIONS CLRUN_TEST_TOOL_PRELOAD ;;
*-fsanitize=thread*)
    echo "SKIP: the Python binding is not tested under ThreadSanitizer"
    exit 77 ;;
esac
cache=$(mktemp -d "${TMPDIR:-/tmp}/clrun-pytest-XXXXXX") || exit 1
trap 'rm -rf "$cache"' EXIT
POCL_DEVICES=${POCL_DEVICES:-"pthread pthread"}
CLRUN_CACHE_DIR=$cache
CLRUN_BIN="$top_builddir/clrun"
CLRUN_SRCDIR=$top_srcdir
PYTHONPATH="$top_srcdir/python:$top_srcdir/tests/python${PYTHONPATH:+:$PYTHONPATH}"
PYTHONDONTWRITEBYTECODE=1
export POCL_DEVICES CLRUN_CACHE_DIR CLRUN_LIBRARY CLRUN_BIN CLRUN_SRCDIR PYTHONPATH PYTHONDONTWRITEBYTECODE
"$PYTHON" "$test_file"
