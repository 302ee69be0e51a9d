#!/bin/sh
# Opsets 18 to 21 through `clrun run MODEL.onnx --input ... --output-dir` (tests/onnx_opset18.py):
# single-node models written with python3-onnx at the opset each change came in (the opset
# import set by hand: Debian's onnx 1.12 knows 17), against a numpy reference of the spec; what
# clrun does not do at those opsets refused by name. Skipped (exit 77) without a python3 that
# has onnx and numpy. Run by `make check` from the build directory; CLRUN_BIN overrides the tool
# (default ./clrun), ONNX_PYTHON the interpreter.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
need_onnx_python
make_tmp onnx-opset18
"$PYTHON" "${srcdir:-.}/tests/onnx_opset18.py" "$CLRUN" "$tmp"
