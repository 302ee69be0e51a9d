#!/bin/sh
# Real models through `clrun run MODEL.onnx --input ... --output-dir` (tests/onnx_models.py):
# built at test time with python3-onnx, checked against numpy references in every allocator
# mode. Skipped (exit 77) without a python3 that has onnx and numpy. Run by `make check` from the
# build directory; CLRUN_BIN overrides the tool (default ./clrun), ONNX_PYTHON the interpreter.
set -u
CLRUN=${CLRUN_BIN:-./clrun}
PYTHON=${ONNX_PYTHON:-/usr/bin/python3}
if ! "$PYTHON" -c 'import onnx, numpy' >/dev/null 2>&1; then
    echo "SKIP: $PYTHON lacks the onnx or numpy module (apt-get install python3-onnx python3-numpy)"
    exit 77
fi
tmp=${TMPDIR:-/tmp}/clrun-onnx-models.$$
mkdir -p "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" "${srcdir:-.}/tests/onnx_models.py" "$CLRUN" "$tmp"
