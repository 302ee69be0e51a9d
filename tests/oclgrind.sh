#!/bin/sh
# The device tests under `oclgrind --check-api --data-races`: every kernel they launch is
# simulated work-item by work-item, and any invalid access, data race or OpenCL API error
# oclgrind reports fails the test, as does a test that fails. Opt-in, being slow (minutes per
# binary): CLRUN_OCLGRIND=1 make check TESTS=tests/oclgrind.sh. CLRUN_OCLGRIND_TESTS names the
# binaries (default below), CLRUN_TEST_FILTER picks tests inside them (cmocka's pattern, e.g.
# "conv2d_*"), OCLGRIND_FLAGS adds oclgrind options (e.g. --uninitialized), CLRUN_OCLGRIND_LOGS
# names a directory to keep each binary's output and oclgrind log in. Skipped, with a line
# saying so, when oclgrind is not installed and in sanitizer builds (oclgrind's runtime is
# preloaded, and the sanitizers' must come first).
set -u
TESTS_DIR=${CLRUN_TESTS_DIR:-./tests}
BINARIES=${CLRUN_OCLGRIND_TESTS:-"test_ops test_ops_elementwise test_ops_kernels test_ops_layout test_fuse test_exec test_exec_memory test_exec_layout test_ops_grad_index test_ops_grad_conv test_ops_col2im test_ops_scatter test_ops_sample test_ops_detect test_ops_qlinear test_narrow_weights test_onnx_conv_transpose test_train_fused test_exec_loop"}

if [ "${CLRUN_OCLGRIND:-0}" != 1 ]; then
    echo "SKIP: oclgrind: opt-in, being slow; run with CLRUN_OCLGRIND=1"
    exit 77
fi
if ! command -v oclgrind >/dev/null 2>&1; then
    echo "SKIP: oclgrind: not installed (Debian package oclgrind)"
    exit 77
fi
# Tests that build a broken kernel on purpose, and the error oclgrind reports for it (on stderr,
# not in its log): the only API errors allowed.
EXPECTED_BUILD_FAILURES="epilogue_that_does_not_build_is_a_clean_error a_kernel_that_does_not_build_runs_unfused convolution_epilogues_share_one_program_where_kernels_compile_at_launch"
# The models of test_fuse take hours simulated; their kernels are the ones the other tests run.
DEFAULT_SKIP_test_fuse="*_keep_their_bits_and_memory"
# The large cases (an embedding's gradient, 1e5 dropout elements) run the kernels the small
# ones run.
DEFAULT_SKIP_test_ops_grad_index="*_at_scale"
# The fused-update bit checks run 72 trainers each (about an hour simulated); the peak test
# runs the same kernels, the update inside the product writing the state in place.
DEFAULT_SKIP_test_train_fused="*_same_bits_fused_or_not"
# Environment per binary: test_fuse's products would time every variant of the matmul core,
# simulated, for each new shape (test_ops_kernels checks the variants); at 2 rounds it runs 2
# random graphs (each in every mode) and each test's graph in 3 modes, rotating (every mode
# runs the same kernels; the plain build runs them all).
DEFAULT_ENV_test_fuse="CLRUN_TUNE=0 CLRUN_TEST_ROUNDS=2"
# Narrow weights: one allocator (each runs the same kernels), no timing of the core's variants.
DEFAULT_ENV_test_narrow_weights="CLRUN_TUNE=0 CLRUN_TEST_ROUNDS=1"

# unexpected_api_errors OUTPUT: the API errors oclgrind printed, but for the expected ones: as
# "test: function: error" lines.
unexpected_api_errors() {
    awk -v expected=" $EXPECTED_BUILD_FAILURES " '
        /^\[ RUN +\] / { test = $NF }
        /^Oclgrind - OpenCL runtime error detected/ { pending = 1; function_name = ""; next }
        pending && $1 == "Function:" { function_name = $2; next }
        pending && $1 == "Error:" {
            pending = 0
            if (function_name == "clBuildProgram" && $2 == "CL_BUILD_PROGRAM_FAILURE" &&
                index(expected, " " test " "))
                next
            print test ": " function_name ": " $2
        }' "$1"
}

tmp=${TMPDIR:-/tmp}/clrun-oclgrind-test.$$
mkdir -p "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
failures=0

# Every binary, resolved before any runs: a libtool wrapper script runs the program it wraps,
# with its library directory.
for name in $BINARIES; do
    program=$TESTS_DIR/$name
    [ -x "$program" ] || { echo "oclgrind: $program not built" >&2; exit 99; }
    if head -c 2 "$program" | grep -q '#!'; then
        libs=$(cd "$TESTS_DIR" && pwd)/.libs
        for real in "$libs/lt-$name" "$libs/$name"; do [ -x "$real" ] && break; done
        program=$real
        LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        export LD_LIBRARY_PATH
    fi
    if ldd "$program" 2>/dev/null | grep -q -e libasan -e libtsan -e libubsan; then
        echo "SKIP: oclgrind: a sanitizer build; oclgrind's runtime cannot be preloaded"
        exit 77
    fi
    echo "$program" >"$tmp/$name.program"
done

# check NAME: runs one binary under oclgrind, writing its verdict to $tmp/NAME.verdict and
# creating $tmp/NAME.failed when it fails.
check() {
    name=$1
    program=$(cat "$tmp/$name.program")
    log=$tmp/$name.oclgrind.log
    start=$(date +%s)
    skip=${CLRUN_TEST_SKIP-$(eval echo "\"\${DEFAULT_SKIP_$name:-}\"")}
    extra_env=$(eval echo "\"\${DEFAULT_ENV_$name:-}\"")
    # shellcheck disable=SC2086 # OCLGRIND_FLAGS and extra_env are lists of words
    oclgrind --check-api --data-races --log "$log" ${OCLGRIND_FLAGS:-} \
        env CLRUN_LOG=info $extra_env ${skip:+CLRUN_TEST_SKIP="$skip"} "$program" >"$tmp/$name.out" 2>&1
    rc=$?
    seconds=$(($(date +%s) - start))
    # The device the tests ran on: oclgrind's, or it checked nothing.
    if ! grep -q "device 0: Oclgrind" "$tmp/$name.out"; then
        { echo "FAIL: $name did not run on oclgrind's device (${seconds}s):"
          tail -n 20 "$tmp/$name.out"; } >"$tmp/$name.verdict"
        : >"$tmp/$name.failed"
    elif [ $rc -ne 0 ] || [ -s "$log" ] || unexpected_api_errors "$tmp/$name.out" | grep -q .; then
        { echo "FAIL: $name under oclgrind (exit $rc, ${seconds}s):"
          grep -e FAILED -e '^\[  ERROR' "$tmp/$name.out" | head -n 20
          unexpected_api_errors "$tmp/$name.out" | head -n 20
          head -n 60 "$log"; } >"$tmp/$name.verdict"
        : >"$tmp/$name.failed"
    else
        echo "ok: $name under oclgrind (${seconds}s)" >"$tmp/$name.verdict"
    fi
    [ -n "${CLRUN_OCLGRIND_LOGS:-}" ] && mkdir -p "$CLRUN_OCLGRIND_LOGS" &&
        cp "$log" "$tmp/$name.out" "$CLRUN_OCLGRIND_LOGS/" 2>/dev/null
    return 0
}

# Most of a binary's time under oclgrind is one thread (its compiler, and the host side), so the
# binaries run in CLRUN_OCLGRIND_JOBS lanes (default: the number of cores). Each lane takes the
# next binary nobody has claimed (mkdir is atomic), longest first as listed.
lane() {
    for name in $BINARIES; do
        mkdir "$tmp/$name.claim" 2>/dev/null && check "$name"
    done
}
jobs=${CLRUN_OCLGRIND_JOBS:-$(nproc 2>/dev/null || echo 1)}
i=1
while [ "$i" -lt "$jobs" ]; do
    lane &
    i=$((i + 1))
done
lane
wait
for name in $BINARIES; do
    cat "$tmp/$name.verdict" 2>/dev/null || { echo "FAIL: $name gave no verdict"; failures=$((failures + 1)); }
    [ -e "$tmp/$name.failed" ] && failures=$((failures + 1))
done
[ $failures -eq 0 ]
