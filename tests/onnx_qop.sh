#!/bin/sh
# Quantized ONNX models in the QOperator form (tests/onnx_qop.py): QLinearConv CNNs and a
# transformer block in onnxruntime's dynamic (MatMulInteger) and QLinearMatMul forms, every
# quantized value exact against numpy and of its 8-bit type, under tlsf, buddy, planned, naive
# and CLRUN_FUSION=0; the int8 weights resident as int8; bad quantized nodes refused by name.
# Skipped (exit 77) without a python3 that has onnx and numpy. CLRUN_BIN overrides the tool
# (default ./clrun), ONNX_PYTHON the interpreter.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
need_onnx_python
make_tmp onnx-qop
"$PYTHON" "${srcdir:-.}/tests/onnx_qop.py" "$CLRUN" "$tmp"
