#!/bin/sh
# `clrun onnx-test` on folders that hold no test case: an error (exit 1, "no test cases found
# in DIR"), said before any device work, never "0 passed, 0 failed, 0 unsupported" and success.
# Needs no device and no python. CLRUN_BIN overrides the tool (default ./clrun).
set -u
. "${srcdir:-.}/tests/cli_common.sh"
make_tmp cli-onnx-empty

mkdir -p "$tmp/empty" "$tmp/nested/a/b" "$tmp/case"
: >"$tmp/nested/a/b/notes.txt"
: >"$tmp/case/model.onnx"

"$CLRUN" onnx-test "$tmp/empty" >"$tmp/out" 2>&1
rc=$?
expect 1 "no test cases found in $tmp/empty" "$tmp/out" "onnx-test on an empty folder"
grep -q "passed" "$tmp/out" && fail "onnx-test on an empty folder printed a summary: $(cat "$tmp/out")"

"$CLRUN" onnx-test "$tmp/nested" >"$tmp/out" 2>&1
rc=$?
expect 1 "no test cases found in $tmp/nested" "$tmp/out" "onnx-test on folders without model.onnx"

# One folder with a case (here an empty model, refused when it runs) does not excuse another
# without: the empty one is named, and nothing runs.
"$CLRUN" onnx-test "$tmp/case" "$tmp/empty" >"$tmp/out" 2>&1
rc=$?
expect 1 "no test cases found in $tmp/empty" "$tmp/out" "onnx-test with one empty folder of two"
grep -q "$tmp/case" "$tmp/out" && fail "onnx-test ran a case before refusing: $(cat "$tmp/out")"

exit $((failures != 0))
