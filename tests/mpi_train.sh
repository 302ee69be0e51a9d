#!/bin/sh
# libclrun-mpi (<clrun/mpi.h>) through its C API (tests/test_mpi) and through Python's clrun.mpi
# (tests/python/mpi_train.py) under mpirun -np 1 (C only), 2 and 3 (a global batch of 32 that 3
# does not divide; Python on 2 only below 3 rounds): each ends with the parameters of one process
# at the same global batch within 1e-6, the same bits on every rank, and refuses bad input with a
# clear error; Python says so when libclrun-mpi is not there. Skipped (77) when configure found no
# MPI; the Python part skipped without numpy. Run by `make check`.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
CLRUN_MPI_NO_PYTHON=yes # the C part needs neither onnx nor scikit-learn
. "${srcdir:-.}/tests/cli_mpi_common.sh"

top_srcdir=$(cd "${srcdir:-.}" && pwd)
for n in 1 2 3; do
    out=$(mpi $n tests/test_mpi 2>&1)
    rc=$?
    printf '%s\n' "$out"
    [ $rc = 0 ] || fail "tests/test_mpi on $n rank(s): exit status $rc"
    printf '%s\n' "$out" | grep -q "test_mpi: $n rank" || fail "tests/test_mpi on $n rank(s): no verdict"
done

PYTHON=${ONNX_PYTHON:-/usr/bin/python3}
if ! "$PYTHON" -c 'import numpy' >/dev/null 2>&1; then
    echo "SKIP (Python part): $PYTHON lacks numpy"
    exit $((failures > 0))
fi
# the Python test through tests/python/run.sh (the build tree's library and package; in a
# sanitized build, run.sh preloads the sanitizer's runtime, found through the compiler)
py() {
    env PYTHON="$PYTHON" CLRUN_HAVE_NUMPY=yes CC="${CLRUN_TEST_CC:-cc}" \
        SANITIZER_CFLAGS="${SANITIZER_CFLAGS:-}" top_builddir="$PWD" top_srcdir="$top_srcdir" \
        sh "$top_srcdir/tests/python/run.sh" "$top_srcdir/tests/python/mpi_train.py"
}
# Below 3 rounds (the sanitizer build's) Python runs on 2 ranks only: 3 ranks' uneven shares are
# the library's, which tests/test_mpi ran on 3 above.
py_ranks="2 3"
[ "${CLRUN_TEST_ROUNDS:-3}" -ge 3 ] || py_ranks=2
for n in $py_ranks; do
    mpi $n env PYTHON="$PYTHON" CLRUN_HAVE_NUMPY=yes CC="${CLRUN_TEST_CC:-cc}" \
        SANITIZER_CFLAGS="${SANITIZER_CFLAGS:-}" top_builddir="$PWD" top_srcdir="$top_srcdir" \
        sh "$top_srcdir/tests/python/run.sh" "$top_srcdir/tests/python/mpi_train.py"
    rc=$?
    [ $rc = 0 ] || fail "tests/python/mpi_train.py on $n rank(s): exit status $rc"
done
MPI_TRAIN_MODE=absent CLRUN_MPI_LIBRARY=/nonexistent/libclrun-mpi.so.0 py ||
    fail "tests/python/mpi_train.py without libclrun-mpi"
exit $((failures > 0))
