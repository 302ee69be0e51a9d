#!/bin/sh
# Empty tensors at run time through `clrun run MODEL.onnx --input ... --output-dir`
# (tests/onnx_empty.py): an empty graph input fed as an empty .npy, empty intermediates and
# outputs, against numpy, in every allocator mode and with fusion off. Skipped (exit 77) without
# a python3 that has onnx and numpy. CLRUN_BIN overrides the tool (default ./clrun), ONNX_PYTHON
# the interpreter.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
need_onnx_python
make_tmp onnx-empty
"$PYTHON" "${srcdir:-.}/tests/onnx_empty.py" "$CLRUN" "$tmp"
