#!/bin/sh
# Real models through `clrun run MODEL.onnx --input ... --output-dir` (tests/onnx_models.py):
# built at test time with python3-onnx, checked against numpy references in every allocator
# mode. Skipped (exit 77) without a python3 that has onnx and numpy. Run by `make check` from the
# build directory; CLRUN_BIN overrides the tool (default ./clrun), ONNX_PYTHON the interpreter.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
need_onnx_python
make_tmp onnx-models
"$PYTHON" "${srcdir:-.}/tests/onnx_models.py" "$CLRUN" "$tmp"
