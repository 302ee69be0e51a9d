#!/bin/sh
# NonMaxSuppression, MaxPool's Indices and MaxUnpool through `clrun run MODEL.onnx --input ...
# --output-dir` (tests/onnx_detect.py): single nodes built with python3-onnx against a numpy
# reference of onnxruntime's algorithms, bad input refused by node, and a detection head with
# NMS exported by torch.onnx.export against torch's outputs (skipped, saying so, without torch).
# Skipped (exit 77) without a python3 that has onnx and numpy. Run by `make check` from the build
# directory; CLRUN_BIN overrides the tool (default ./clrun), ONNX_PYTHON the interpreter.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
need_onnx_python
make_tmp onnx-detect
"$PYTHON" "${srcdir:-.}/tests/onnx_detect.py" "$CLRUN" "$tmp"
