#!/bin/sh
# The ONNX backend conformance suite (Debian's libonnx-testdata) through `clrun onnx-test`: every
# case of node, pytorch-converted, pytorch-operator and simple under the buddy allocator, and
# node again in planned mode and with fusion off (CLRUN_FUSION=0, about 30 s more), unless
# CLRUN_TEST_ROUNDS is below 3. Fails on any FAIL (a wrong answer); cases clrun refuses are
# UNSUPPORTED and counted, and a case whose expected outputs the suite itself gets wrong is
# BAD-DATA (the runner's table names each with its upstream report). Skipped (exit 77) when the
# suite is not installed. Run by `make check` from the build directory; CLRUN_BIN overrides the
# tool (default ./clrun), ONNX_TESTDATA the suite's folder.
set -u
CLRUN=${CLRUN_BIN:-./clrun}
DATA=${ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
if [ ! -d "$DATA/node" ]; then
    echo "SKIP: the ONNX test cases are not at $DATA (apt-get install libonnx-testdata)"
    exit 77
fi
tmp=${TMPDIR:-/tmp}/clrun-onnx-suite.$$
mkdir -p "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
failures=0
run() { # mode label folders...
    mode=$1
    label=$2
    shift 2
    "$CLRUN" onnx-test --allocator "$mode" --quiet "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    summary=$(tail -n 1 "$tmp/out")
    echo "onnx-test $label ($mode): $summary"
    grep -E '^(FAIL|BAD-DATA)' "$tmp/out"
    failed=$(echo "$summary" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
    if [ "$failed" != 0 ] || [ $rc != 0 ]; then
        echo "FAIL: onnx-test $label ($mode) exited $rc: $(cat "$tmp/err")" >&2
        failures=$((failures + 1))
    fi
}

for folder in node pytorch-converted pytorch-operator simple; do
    [ -d "$DATA/$folder" ] && run buddy "$folder" "$DATA/$folder"
done
# CLRUN_TEST_ROUNDS, when set (the sanitizer build, distcheck), caps the node folder's runs: the
# first under buddy, then planned, then fusion off
rounds=${CLRUN_TEST_ROUNDS:-3}
case $rounds in '' | *[!0-9]*) rounds=3 ;; esac
[ "$rounds" -ge 2 ] && run planned node "$DATA/node"
if [ "$rounds" -ge 3 ]; then
    # every node its own kernel: the results must not depend on fusion
    CLRUN_FUSION=0
    export CLRUN_FUSION
    run buddy "node, fusion off" "$DATA/node"
    unset CLRUN_FUSION
fi
[ $failures = 0 ]
