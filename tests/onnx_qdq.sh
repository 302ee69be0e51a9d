#!/bin/sh
# Quantized ONNX models in the QDQ form (tests/onnx_qdq.py): DequantizeLinear of an int8 or uint8
# initializer feeding Conv, MatMul and Gemm weights, per tensor and per axis, folded into the
# products: within 1e-5 of numpy, the int8 bytes resident, no f32 weight in the run's peak.
# Skipped (exit 77) without a python3 that has onnx and numpy. CLRUN_BIN overrides the tool
# (default ./clrun), ONNX_PYTHON the interpreter.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
need_onnx_python
make_tmp onnx-qdq
"$PYTHON" "${srcdir:-.}/tests/onnx_qdq.py" "$CLRUN" "$tmp"
