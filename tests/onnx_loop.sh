#!/bin/sh
# Loop with its trip count and condition fed at run time through `clrun run MODEL.onnx --input ...
# (tests/onnx_loop.py): models built with python3-onnx against a numpy
# reference, under every allocator and with fusion off. Skipped (exit 77) without a python3
# that has onnx and numpy. Run by `make check` from the build directory; CLRUN_BIN overrides the tool (default ./clrun),
# ONNX_PYTHON the interpreter.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
need_onnx_python
make_tmp onnx-loop
"$PYTHON" "${srcdir:-.}/tests/onnx_loop.py" "$CLRUN" "$tmp"
