#!/bin/sh
# If with a run-time condition, Scan and Loop through `clrun run MODEL.onnx --input ... --output-dir`
# (tests/onnx_control.py): models built with python3-onnx against a numpy
# reference, under every allocator and with fusion off. Skipped (exit 77) without a python3
# that has onnx and numpy. Run by `make check` from the build directory; CLRUN_BIN overrides the tool (default ./clrun),
# ONNX_PYTHON the interpreter.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
need_onnx_python
make_tmp onnx-control
"$PYTHON" "${srcdir:-.}/tests/onnx_control.py" "$CLRUN" "$tmp"
