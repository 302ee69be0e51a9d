#!/bin/sh
# 3-D ConvTranspose through `clrun run MODEL.onnx` (tests/onnx_window3d.py): single-node models
# written with python3-onnx, against a numpy reference of the spec in double precision; bad input
# refused by name. Skipped (exit 77) without a python3 that has onnx and numpy. CLRUN_BIN
# overrides the tool (default ./clrun), ONNX_PYTHON the interpreter.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
need_onnx_python
make_tmp onnx-window3d
"$PYTHON" "${srcdir:-.}/tests/onnx_window3d.py" "$CLRUN" "$tmp"
