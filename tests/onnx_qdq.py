#!/usr/bin/python3
"""Quantized ONNX models in the QDQ form through `clrun run MODEL.onnx`: a DequantizeLinear of a
constant int8 or uint8 initializer feeding the weight of a Conv, a MatMul or a Gemm (transB),
per tensor and per output-channel axis, with and without zero points, folded into the product
(lib/fuse/fold_dequant.c). Checks, against numpy's (q - zero) * scale then the product (float64):
the outputs within 1e-5 (relative to the largest), that the resident constants are the int8
bytes (and the per-channel scales), not an f32 copy, and that the run's peak holds no f32 weight.
Usage: onnx_qdq.py CLRUN WORKDIR"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def run(clrun, folder, m, inputs, extra=()):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    onnx.save(m, path)
    out = os.path.join(folder, "out")
    args = [clrun, "run", path, "--repeat", "1", "--json", "--output-dir", out] + list(extra)
    for key, value in inputs.items():
        np.save(os.path.join(folder, key + ".npy"), value)
        args += ["--input", f"{key}={os.path.join(folder, key + '.npy')}"]
    proc = subprocess.run(args, capture_output=True, text=True, errors="replace")
    if proc.returncode != 0:
        sys.exit(f"{folder}: clrun run failed: {proc.stderr.strip()}")
    return np.load(os.path.join(out, "y.npy")), json.loads(proc.stdout)


def conv2d(x, w):
    """x [N, C, H, W], w [O, C, KH, KW], padding 1, stride 1, in float64."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((n, o, h, wd))
    for i in range(kh):
        for j in range(kw):
            y += np.einsum("nchw,oc->nohw", xp[:, :, i:i + h, j:j + wd], w[:, :, i, j])
    return y


def dequant(name, q, scale, zero, axis):
    inits = [numpy_helper.from_array(q, name + "_q"), numpy_helper.from_array(scale, name + "_s")]
    ins = [name + "_q", name + "_s"]
    if zero is not None:
        inits.append(numpy_helper.from_array(zero, name + "_z"))
        ins.append(name + "_z")
    attrs = {"axis": axis} if scale.ndim == 1 else {}
    return helper.make_node("DequantizeLinear", ins, [name], **attrs), inits


def widen(q, scale, zero, axis):
    shape = [1] * q.ndim
    if scale.ndim == 1:
        shape[axis] = -1
    z = np.zeros(1) if zero is None else zero.astype(np.float64).reshape(shape)
    return (q.astype(np.float64) - z) * scale.astype(np.float64).reshape(shape)


def main():
    clrun, work = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(25)
    failures = 0
    for kind in ("conv", "matmul", "gemm"):
        for per_axis in (False, True):
            for dtype in (np.int8, np.uint8):
                with_zero = dtype == np.uint8 or per_axis
                if kind == "conv":
                    shape, axis, x = (64, 32, 3, 3), 0, rng.standard_normal((1, 32, 12, 12)).astype(np.float32)
                elif kind == "matmul":
                    shape, axis, x = (256, 192), 1, rng.standard_normal((24, 256)).astype(np.float32)
                else:  # Gemm with transB: B is [N, K], its output channels on axis 0
                    shape, axis, x = (192, 256), 0, rng.standard_normal((24, 256)).astype(np.float32)
                info = np.iinfo(dtype)
                q = rng.integers(info.min, info.max + 1, shape, dtype=dtype)
                channels = shape[axis]
                scale = (rng.random(channels if per_axis else ()) * 0.02 + 0.001).astype(np.float32)
                zero = None
                if with_zero:
                    low, high = (-20, 21) if dtype == np.int8 else (100, 156)
                    zero = rng.integers(low, high, channels if per_axis else (), dtype=dtype)
                dq, inits = dequant("w", q, scale, zero, axis)
                w = widen(q, scale, zero, axis)
                if kind == "conv":
                    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
                    want = conv2d(x.astype(np.float64), w)
                elif kind == "matmul":
                    node = helper.make_node("MatMul", ["x", "w"], ["y"])
                    want = x.astype(np.float64) @ w
                else:
                    node = helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)
                    want = x.astype(np.float64) @ w.T
                def make(nodes, initializers):
                    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", F, x.shape)],
                                              [helper.make_tensor_value_info("y", F, None)], initializers)
                    made = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
                    made.ir_version = 8
                    return made
                name = f"{kind}_{'axis' if per_axis else 'tensor'}_{np.dtype(dtype).name}{'_zp' if with_zero else ''}"
                got, report = run(clrun, os.path.join(work, name), make([dq, node], inits), {"x": x})
                # the same product over the f32 weight: the peak the QDQ model's run must keep
                _, plain = run(clrun, os.path.join(work, name + "_f32"),
                               make([node], [numpy_helper.from_array(w.astype(np.float32), "w")]), {"x": x})
                err = float(np.max(np.abs(got.astype(np.float64) - want)) / np.max(np.abs(want)))
                resident = report["constant_bytes"]
                # int8 bytes, the panels' padding and a scale and zero point per channel (f32)
                most = q.size + 64 * 4 + 8 * channels + 4096
                problems = []
                if got.shape != want.shape or not err <= 1e-5:
                    problems.append(f"relative error {err:.3g}")
                if resident > most:
                    problems.append(f"resident constants {resident} bytes, expected at most {most} (int8: {q.size})")
                if report["peak_bytes"] > plain["peak_bytes"]:
                    problems.append(f"run peak {report['peak_bytes']} bytes, the f32 model's {plain['peak_bytes']}")
                status = "ok" if not problems else "FAIL: " + "; ".join(problems)
                print(f"{name}: err {err:.2e}, resident {resident} bytes (int8 {q.size}), peak {report['peak_bytes']} (f32 {plain['peak_bytes']}): {status}")
                failures += bool(problems)
    sys.exit(1 if failures else 0)


main()
