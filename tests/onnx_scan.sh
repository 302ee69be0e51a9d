#!/bin/sh
# Scan run per iteration (over CLRUN_SCAN_UNROLL) and unrolled, through `clrun run MODEL.onnx
# --input ...` (tests/onnx_scan.py): models built with python3-onnx against a numpy reference,
# under every allocator and with fusion off. Skipped (exit 77) without a python3 that has onnx
# and numpy. Run by `make check` from the build directory; CLRUN_BIN overrides the tool (default
# ./clrun), ONNX_PYTHON the interpreter.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
need_onnx_python
make_tmp onnx-scan
"$PYTHON" "${srcdir:-.}/tests/onnx_scan.py" "$CLRUN" "$tmp"
