#!/bin/sh
# Ops over empty operands whose results are not empty (tests/onnx_empty_ops.py): a padded Conv
# over an empty image, a Gemm with K = 0, Pad of an empty tensor, reductions of nothing, a Split
# leaving an empty part, LSTM, GRU, RNN and Loop over a zero dimension, against numpy's reference
# of the spec, in every allocator mode and with fusion off; what the spec leaves undefined
# refused by name. Skipped (exit 77) without a python3 that has onnx and numpy. CLRUN_BIN
# overrides the tool (default ./clrun), ONNX_PYTHON the interpreter.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
need_onnx_python
make_tmp onnx-empty-ops
"$PYTHON" "${srcdir:-.}/tests/onnx_empty_ops.py" "$CLRUN" "$tmp"
