#!/bin/sh
# bfloat16 storage through `clrun run MODEL.onnx` (tests/onnx_bf16.py): Cast to and from
# BFLOAT16 (rounding to nearest even, NaN kept) from float, double and integers, bfloat16
# initializers, elementwise ops on bf16, `--weights bf16`, and ops that do not take bf16 refused
# naming the node, each
# against a numpy reference that rounds by bit manipulation (numpy has no bfloat16). Skipped
# (exit 77) without a python3 that has onnx and numpy. CLRUN_BIN overrides the tool (default
# ./clrun), ONNX_PYTHON the interpreter.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
need_onnx_python
make_tmp onnx-bf16
"$PYTHON" "${srcdir:-.}/tests/onnx_bf16.py" "$CLRUN" "$tmp"
