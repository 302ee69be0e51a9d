#!/bin/sh
# DFT (opsets 17 and 20) and STFT (opset 17) through `clrun run MODEL.onnx`
# (tests/onnx_spectral.py): single-node models written with python3-onnx (the opset import set
# by hand), against numpy.fft; bad input refused by name. Skipped (exit 77) without a python3
# that has onnx and numpy. CLRUN_BIN overrides the tool (default ./clrun), ONNX_PYTHON the
# interpreter.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
need_onnx_python
make_tmp onnx-spectral
"$PYTHON" "${srcdir:-.}/tests/onnx_spectral.py" "$CLRUN" "$tmp"
