#!/bin/sh
# BitwiseAnd/Or/Xor/Not (opset 18), LpPool / GlobalLpPool and int8/uint8 MaxPool through
# `clrun run MODEL.onnx` (tests/onnx_bitwise_lppool.py): single-node models written with
# python3-onnx (the opset import set by hand), against a numpy reference of the spec; bad input
# refused by name. Skipped (exit 77) without a python3 that has onnx and numpy. CLRUN_BIN
# overrides the tool (default ./clrun), ONNX_PYTHON the interpreter.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
need_onnx_python
make_tmp onnx-bitwise-lppool
"$PYTHON" "${srcdir:-.}/tests/onnx_bitwise_lppool.py" "$CLRUN" "$tmp"
