#!/usr/bin/python3
"""Quantized ONNX models in the QOperator form through `clrun run MODEL.onnx`, built here with
python3-onnx:
  cnn_u8, cnn_i8  QuantizeLinear -> QLinearConv (per-tensor and per-axis weight scales, zero
           points, int8 and uint8 weights and activations, a bias, stride, dilation, groups,
           depthwise, 1x1) -> ... with an 8-bit MaxPool between -> DequantizeLinear;
  cnn_dynamic  onnxruntime's dynamic form of a CNN: DynamicQuantizeLinear + ConvInteger + Cast +
           the scale multiply, bias and Relu in f32;
  dynamic  a transformer block as onnxruntime's dynamic quantization writes it (Transformers.js
           q8): DynamicQuantizeLinear + MatMulInteger + Cast + the scale multiply for each
           projection, LayerNormalization, Softmax and Gelu-by-Erf in float between;
  qlinear  the same block with QuantizeLinear -> QLinearMatMul -> DequantizeLinear projections;
  matmul_forms  QLinearMatMul per row of a and batched b, MatMulInteger by a vector.
Against a numpy reference of the ONNX semantics written here (f32 as onnxruntime computes them:
the requantization multiplier a_scale * b_scale / y_scale in f32, the accumulator as f32, the
rounding half to even). Every quantized value is a graph output too: its type must be the 8-bit
(or int32) type of the model, and its values equal the reference's exactly, the reference of each
stage fed with clrun's own values of the stage before (a float rounding one ulp away may move an
integer across a rounding boundary only in an end-to-end reference); dequantized and float
values within 1e-5. Run under the tlsf, buddy, planned and naive allocators and with
CLRUN_FUSION=0. The model without the extra outputs must keep its int8 weights resident as int8
(the report's constant_bytes: the initializers' bytes, no widened copy) and, for the QLinearConv
CNNs, its peak no higher than the same convolutions' over the dequantized weights in f32. Bad
quantized nodes, each refused naming its node and the problem, with no output written.
Usage: onnx_qop.py CLRUN WORKDIR"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_common import some_modes

F = TensorProto.FLOAT
ELEM = {np.dtype(np.int8): TensorProto.INT8, np.dtype(np.uint8): TensorProto.UINT8,
        np.dtype(np.int32): TensorProto.INT32, np.dtype(np.float32): F}
MODES = some_modes((("tlsf", {}), ("buddy", {}), ("planned", {}), ("naive", {}), ("buddy", {"CLRUN_FUSION": "0"})))


def f32(v):
    return np.asarray(v, dtype=np.float32)


def run(clrun, folder, m, inputs, names, allocator="buddy", env=None):
    """({name: array}, the --json report) of one run, or (None, its standard error)."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    onnx.save(m, path)
    out = os.path.join(folder, "out")
    args = [clrun, "run", path, "--repeat", "1", "--json", "--allocator", allocator, "--output-dir", out]
    for key, value in inputs.items():
        np.save(os.path.join(folder, key + ".npy"), value)
        args += ["--input", f"{key}={os.path.join(folder, key + '.npy')}"]
    proc = subprocess.run(args, capture_output=True, text=True, errors="replace",
                          env=dict(os.environ, **(env or {})))
    if proc.returncode != 0:
        return None, proc.stderr.strip()
    return {k: np.load(os.path.join(out, k + ".npy")) for k in names}, json.loads(proc.stdout)


def make(nodes, inputs, outputs, inits, opset=17):
    graph = helper.make_graph(nodes, "qop", inputs, outputs, inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def vi(name, dtype=None, dims=None):
    return helper.make_tensor_value_info(name, ELEM[np.dtype(dtype)] if dtype else F, dims)


# ---- the ONNX semantics in numpy ----

def limits(dtype):
    info = np.iinfo(dtype)
    return f32(info.min), f32(info.max)


def quantize(x, scale, zero, dtype):
    """saturate(round_half_even(x / scale) + zero), in f32."""
    lo, hi = limits(dtype)
    t = np.round(f32(x) / f32(scale)) + f32(zero)
    return np.clip(t, lo, hi).astype(dtype)


def dequantize(q, scale, zero):
    return (q.astype(np.float32) - f32(zero)) * f32(scale)


def requantize(acc, multiplier, zero, dtype):
    lo, hi = limits(dtype)
    t = np.round(acc.astype(np.float32) * f32(multiplier)) + f32(zero)
    return np.clip(t, lo, hi).astype(dtype)


def conv_acc(x, xz, w, wz, stride, pad, group, dil=1):
    """The int32 accumulator of ConvInteger: (x - xz) conv (w - wz), zero padding of x - xz."""
    xs = x.astype(np.int64) - np.int64(xz)
    ws = w.astype(np.int64) - np.asarray(wz, dtype=np.int64).reshape(-1, 1, 1, 1)
    n, c, h, wd = xs.shape
    m, cg, kh, kw = ws.shape
    xp = np.pad(xs, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - dil * (kh - 1) - 1) // stride + 1, (wd + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    y = np.zeros((n, m, oh, ow), dtype=np.int64)
    mg = m // group
    for g in range(group):
        xg, wg = xp[:, g * cg:(g + 1) * cg], ws[g * mg:(g + 1) * mg]
        for i in range(kh):
            for j in range(kw):
                patch = xg[:, :, i * dil:i * dil + stride * oh:stride, j * dil:j * dil + stride * ow:stride]
                y[:, g * mg:(g + 1) * mg] += np.einsum("nchw,oc->nohw", patch, wg[:, :, i, j])
    return y.astype(np.int32)


def max_pool(x, k):
    n, c, h, w = x.shape
    return x[:, :, :h // k * k, :w // k * k].reshape(n, c, h // k, k, w // k, k).max(axis=(3, 5))


def layer_norm(x, g, b):
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(-1, keepdims=True)
    return (x64 - mean) / np.sqrt(var + 1e-5) * g + b


def softmax(x):
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def gelu(x):
    from math import erf
    x64 = x.astype(np.float64)
    return 0.5 * x64 * (1 + np.vectorize(erf)(x64 / np.sqrt(2)))


def dynamic_quantize(x):
    """DynamicQuantizeLinear: uint8, the range extended to 0, in f32."""
    lo = np.minimum(f32(x.min()), f32(0))
    hi = np.maximum(f32(x.max()), f32(0))
    scale = (hi - lo) / f32(255)
    zero = np.clip(np.round(f32(0) - lo / scale), 0, 255)
    return quantize(x, scale, zero, np.uint8), f32(scale), zero.astype(np.uint8)


# ---- the models ----

class Builder:
    """A model's nodes and initializers, and where written the same network in f32."""

    def __init__(self, rng):
        self.rng, self.nodes, self.inits = rng, [], []
        self.twin_nodes, self.twin_inits = [], []  # the same network in f32, where written

    def const(self, name, value):
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op, ins, outs, **attrs):
        self.nodes.append(helper.make_node(op, ins, outs, name=outs[0] + "_node", **attrs))

    def weights(self, shape, dtype, axis_len, per_axis):
        """Random 8-bit weights, a scale and a zero point (one per axis_len, or one)."""
        info = np.iinfo(dtype)
        q = self.rng.integers(info.min, info.max + 1, shape, dtype=dtype)
        n = axis_len if per_axis else ()
        scale = f32(self.rng.random(n) * 0.02 + 0.002)
        low, high = (-12, 13) if dtype == np.int8 else (118, 139)
        zero = self.rng.integers(low, high, n, dtype=dtype)
        return q, scale, zero


def cnn(rng, x_dtype, layers):
    """A small CNN: x quantized to x_dtype, layers of (w dtype, per axis, y dtype, out channels, stride, group, bias,
    pool after, kernel size, dilation), between a QuantizeLinear of x and a DequantizeLinear of y."""
    b = Builder(rng)
    x = f32(rng.standard_normal((1, 4, 14, 14)))
    xs = f32(2.0 ** -5)
    x.flat[::7] = (rng.integers(-60, 60, x.size)[::7] + 0.5) * xs  # ties of x / xs: rounded to even
    xz = np.asarray(128 if x_dtype == np.uint8 else 3, dtype=x_dtype)
    b.node("QuantizeLinear", ["x", b.const("x_s", xs), b.const("x_z", xz)], ["q0"])
    stages = [("q0", lambda got: quantize(x, xs, xz, x_dtype))]
    cur, cur_s, cur_z, channels, weight_bytes = "q0", xs, xz, 4, 0
    twin = "x"
    for i, (w_dtype, per_axis, y_dtype, m, stride, group, bias, pool, k, dil) in enumerate(layers, 1):
        pad = dil * (k - 1) // 2
        w, ws, wz = b.weights((m, channels // group, k, k), w_dtype, m, per_axis)
        weight_bytes += w.size
        ys = f32(rng.random() * 0.2 + 0.15)
        if not per_axis:  # a multiplier of 2^-7: acc * 2^-7 ends in .5 often, rounded to even
            ws, ys = f32(2.0 ** -7), f32(cur_s)
        yz = np.asarray(rng.integers(100, 140) if y_dtype == np.uint8 else rng.integers(-10, 10), dtype=y_dtype)
        ins = [cur, f"x{i}_s", f"x{i}_z", b.const(f"w{i}", w), b.const(f"w{i}_s", ws), b.const(f"w{i}_z", wz),
               b.const(f"y{i}_s", ys), b.const(f"y{i}_z", yz)]
        b.inits += [numpy_helper.from_array(np.asarray(cur_s), f"x{i}_s"),
                    numpy_helper.from_array(np.asarray(cur_z), f"x{i}_z")]
        bv = rng.integers(-2000, 2000, m).astype(np.int32) if bias else None
        if bias:
            ins.append(b.const(f"b{i}", bv))
        b.node("QLinearConv", ins, [f"q{i}"], pads=[pad] * 4, strides=[stride, stride], group=group,
               kernel_shape=[k, k], dilations=[dil, dil])
        wf = dequantize(w, ws.reshape(-1, 1, 1, 1), np.asarray(wz).reshape(-1, 1, 1, 1))
        bf = (bv if bias else np.zeros(m)) * cur_s * ws
        b.twin_inits += [numpy_helper.from_array(f32(wf), f"tw{i}"), numpy_helper.from_array(f32(bf), f"tb{i}")]
        b.twin_nodes.append(helper.make_node("Conv", [twin, f"tw{i}", f"tb{i}"], [f"t{i}"], pads=[pad] * 4,
                                             strides=[stride, stride], group=group, dilations=[dil, dil]))
        twin = f"t{i}"

        def stage(got, prev=cur, xs_=cur_s, xz_=cur_z, w=w, ws=ws, wz=wz, ys=ys, yz=yz, bv=bv, stride=stride,
                  group=group, y_dtype=y_dtype, pad=pad, dil=dil):
            acc = conv_acc(got[prev], xz_, w, wz, stride, pad, group, dil)
            if bv is not None:
                acc = acc + bv.reshape(1, -1, 1, 1)
            mult = (f32(xs_) * f32(ws).reshape(-1, 1, 1)) / f32(ys)
            return requantize(acc, mult, yz, y_dtype)
        stages.append((f"q{i}", stage))
        cur, cur_s, cur_z, channels = f"q{i}", ys, yz, m
        if pool:
            b.node("MaxPool", [cur], [f"p{i}"], kernel_shape=[2, 2], strides=[2, 2])
            b.twin_nodes.append(helper.make_node("MaxPool", [twin], [f"tp{i}"], kernel_shape=[2, 2], strides=[2, 2]))
            twin = f"tp{i}"
            stages.append((f"p{i}", lambda got, prev=cur: max_pool(got[prev], 2)))
            cur = f"p{i}"
    b.node("DequantizeLinear", [cur, b.const("out_s", cur_s), b.const("out_z", cur_z)], ["y"])
    b.twin_nodes.append(helper.make_node("Identity", [twin], ["y"]))
    stages.append(("y", lambda got, prev=cur, s=cur_s, z=cur_z: dequantize(got[prev], s, z)))
    return b, {"x": x}, stages, weight_bytes


def cnn_dynamic(rng):
    """A CNN as onnxruntime's dynamic quantization writes it: per layer DynamicQuantizeLinear of
    the f32 activation, ConvInteger (int8 and uint8 weights, a per-channel or absent weight zero
    point), Cast, the scale multiply, a bias and Relu in f32."""
    b = Builder(rng)
    x = f32(rng.standard_normal((2, 3, 12, 12)))
    stages, cur, channels, weight_bytes = [], "x", 3, 0
    for i, (w_dtype, per_axis, zero, m, stride, group) in enumerate(
            [(np.int8, True, True, 16, 1, 1), (np.uint8, False, True, 16, 2, 4), (np.int8, False, False, 24, 1, 1)]):
        name = f"c{i}"
        w, ws, wz = b.weights((m, channels // group, 3, 3), w_dtype, m, per_axis)
        if not zero:
            wz = np.zeros((), w_dtype)
        weight_bytes += w.size
        bias = f32(rng.standard_normal((1, m, 1, 1)) * 0.1)
        b.node("DynamicQuantizeLinear", [cur], [name + "_xq", name + "_xs", name + "_xz"])
        stages += [(name + "_xq", lambda got, src=cur: dynamic_quantize(got[src])[0]),
                   (name + "_xs", lambda got, src=cur: dynamic_quantize(got[src])[1]),
                   (name + "_xz", lambda got, src=cur: dynamic_quantize(got[src])[2])]
        ins = [name + "_xq", b.const(name + "_w", w), name + "_xz"] + ([b.const(name + "_wz", wz)] if zero else [])
        b.node("ConvInteger", ins, [name + "_acc"], pads=[1, 1, 1, 1], strides=[stride, stride], group=group)
        stages.append((name + "_acc", lambda got, name=name, w=w, wz=wz, stride=stride, group=group: conv_acc(
            got[name + "_xq"], got[name + "_xz"], w, wz, stride, 1, group)))
        b.node("Cast", [name + "_acc"], [name + "_accf"], to=F)
        b.node("Mul", [name + "_xs", b.const(name + "_ws", ws.reshape(-1, 1, 1) if per_axis else ws)], [name + "_sc"])
        b.node("Mul", [name + "_accf", name + "_sc"], [name + "_mm"])
        b.node("Add", [name + "_mm", b.const(name + "_bias", bias)], [name + "_b"])
        b.node("Relu", [name + "_b"], [name])
        stages.append((name, lambda got, name=name, ws=ws, bias=bias: np.maximum(
            got[name + "_acc"].astype(np.float32) * (got[name + "_xs"] * f32(ws).reshape(-1, 1, 1)) + bias, 0)))
        cur, channels = name, m
    b.node("Identity", [cur], ["y"])
    stages.append(("y", lambda got, src=cur: got[src]))
    return b, {"x": x}, stages, weight_bytes


def transformer(rng, form, d=64, seq=12, ff=128, batch=2):
    """One pre-norm encoder block: LayerNorm, one-head attention (Q, K, V and output projections),
    a residual, LayerNorm, a feed-forward of two projections with Gelu (by Erf) between, a
    residual. Each projection quantized: 'dynamic' (DynamicQuantizeLinear + MatMulInteger, the
    weight per column of b with zero points, uint8 and int8) or 'qlinear' (QuantizeLinear +
    QLinearMatMul + DequantizeLinear)."""
    b = Builder(rng)
    x = f32(rng.standard_normal((batch, seq, d)))
    stages, weight_bytes = [], 0

    def layernorm(src, name):
        g, be = f32(rng.random(d) + 0.5), f32(rng.standard_normal(d) * 0.1)
        b.node("LayerNormalization", [src, b.const(name + "_g", g), b.const(name + "_b", be)], [name], axis=-1,
               epsilon=1e-5)
        stages.append((name, lambda got: layer_norm(got[src], g, be)))

    def project(src, n_out, name, w_dtype, per_axis, symmetric=False):
        nonlocal weight_bytes
        w, ws, wz = b.weights((src[1], n_out), w_dtype, n_out, per_axis)
        if symmetric:  # no b_zero_point: zero
            wz = np.zeros_like(wz)
        weight_bytes += w.size
        bias = f32(rng.standard_normal(n_out) * 0.1)
        src = src[0]
        if form == "dynamic":
            b.node("DynamicQuantizeLinear", [src], [name + "_xq", name + "_xs", name + "_xz"])
            stages.append((name + "_xq", lambda got: dynamic_quantize(got[src])[0]))
            stages.append((name + "_xs", lambda got: dynamic_quantize(got[src])[1]))
            stages.append((name + "_xz", lambda got: dynamic_quantize(got[src])[2]))
            b.node("MatMulInteger", [name + "_xq", b.const(name + "_w", w), name + "_xz"] +
                   ([] if symmetric else [b.const(name + "_wz", wz)]), [name + "_acc"])
            stages.append((name + "_acc", lambda got: (
                (got[name + "_xq"].astype(np.int64) - np.int64(got[name + "_xz"])) @
                (w.astype(np.int64) - wz.astype(np.int64))).astype(np.int32)))
            b.node("Cast", [name + "_acc"], [name + "_accf"], to=F)
            b.node("Mul", [name + "_xs", b.const(name + "_ws", ws)], [name + "_sc"])
            b.node("Mul", [name + "_accf", name + "_sc"], [name + "_mm"])
            b.node("Add", [name + "_mm", b.const(name + "_bias", bias)], [name])
            stages.append((name, lambda got: got[name + "_acc"].astype(np.float32) *
                           (got[name + "_xs"] * ws) + bias))
        else:
            xs, xz = f32(0.05), np.asarray(128, dtype=np.uint8)
            ys = f32(0.4 if name.startswith("f1") else 0.25)
            yz = np.asarray(rng.integers(-8, 8), dtype=np.int8)
            b.node("QuantizeLinear", [src, b.const(name + "_xs", xs), b.const(name + "_xz", xz)], [name + "_xq"])
            stages.append((name + "_xq", lambda got: quantize(got[src], xs, xz, np.uint8)))
            b.node("QLinearMatMul", [name + "_xq", name + "_xs", name + "_xz", b.const(name + "_w", w),
                                     b.const(name + "_ws", ws), b.const(name + "_wz", wz),
                                     b.const(name + "_ys", ys), b.const(name + "_yz", yz)], [name + "_yq"])

            def qmm(got):
                acc = ((got[name + "_xq"].astype(np.int64) - np.int64(xz)) @
                       (w.astype(np.int64) - wz.astype(np.int64))).astype(np.int32)
                return requantize(acc, (xs * ws) / ys, yz, np.int8)
            stages.append((name + "_yq", qmm))
            b.node("DequantizeLinear", [name + "_yq", name + "_ys", name + "_yz"], [name + "_dq"])
            b.node("Add", [name + "_dq", b.const(name + "_bias", bias)], [name])
            stages.append((name, lambda got: dequantize(got[name + "_yq"], ys, yz) + bias))
        return name

    layernorm("x", "ln1")
    q = project(("ln1", d), d, "q", np.uint8, False)
    k = project(("ln1", d), d, "k", np.int8, True)
    v = project(("ln1", d), d, "v", np.int8, False, symmetric=True)
    b.node("Transpose", [k], ["kt"], perm=[0, 2, 1])
    b.node("MatMul", [q, "kt"], ["qk"])
    b.node("Mul", ["qk", b.const("inv_sqrt_d", f32(1 / np.sqrt(d)))], ["logits"])
    b.node("Softmax", ["logits"], ["att"], axis=-1)
    stages.append(("att", lambda got: softmax((got["q"].astype(np.float64) @ got["k"].astype(np.float64).swapaxes(1, 2))
                                              * f32(1 / np.sqrt(d)))))
    b.node("MatMul", ["att", v], ["ctx"])
    stages.append(("ctx", lambda got: got["att"].astype(np.float64) @ got["v"].astype(np.float64)))
    o = project(("ctx", d), d, "o", np.uint8, True)
    b.node("Add", ["x", o], ["h"])
    stages.append(("h", lambda got: x.astype(np.float64) + got["o"]))
    layernorm("h", "ln2")
    f1 = project(("ln2", d), ff, "f1", np.int8, True)
    b.node("Div", [f1, b.const("sqrt2", f32(np.sqrt(2)))], ["f1d"])
    b.node("Erf", ["f1d"], ["f1e"])
    b.node("Add", ["f1e", b.const("one", f32(1))], ["f1p"])
    b.node("Mul", [f1, "f1p"], ["f1m"])
    b.node("Mul", ["f1m", b.const("half", f32(0.5))], ["g"])
    stages.append(("g", lambda got: gelu(got["f1"])))
    f2 = project(("g", ff), d, "f2", np.uint8, False)
    b.node("Add", ["h", f2], ["y"])
    stages.append(("y", lambda got: got["h"].astype(np.float64) + got["f2"]))
    return b, {"x": x}, stages, weight_bytes


def matmul_forms(rng):
    """QLinearMatMul of a uint8 input [2, M, K] quantized per row (a_scale and a_zero_point [M])
    by a batched int8 b [2, K, N] per column, and MatMulInteger of it by a uint8 vector [K] with a
    per-row a_zero_point ([M, 1]) and a scalar b_zero_point (numpy's vector product)."""
    b = Builder(rng)
    m, k, n = 6, 40, 10
    a = rng.integers(0, 256, (2, m, k), dtype=np.uint8)
    az, as_ = rng.integers(100, 156, m, dtype=np.uint8), f32(rng.random(m) * 0.02 + 0.01)
    w, ws, wz = b.weights((2, k, n), np.int8, n, True)
    ys, yz = f32(0.5), np.int8(-3)
    b.node("QLinearMatMul", ["a", b.const("a_s", as_), b.const("a_z", az), b.const("w", w), b.const("w_s", ws),
                             b.const("w_z", wz), b.const("y_s", ys), b.const("y_z", yz)], ["qmm"])

    def qmm(got):
        acc = ((got["a"].astype(np.int64) - az.astype(np.int64).reshape(m, 1)) @
               (w.astype(np.int64) - wz.astype(np.int64))).astype(np.int32)
        return requantize(acc, (as_.reshape(m, 1) * ws) / ys, yz, np.int8)
    v = rng.integers(0, 256, k, dtype=np.uint8)
    b.node("MatMulInteger", ["a", b.const("v", v), b.const("a_z2", az.reshape(m, 1)), b.const("v_z", np.uint8(7))],
           ["mv"])
    stages = [("qmm", qmm),
              ("mv", lambda got: ((got["a"].astype(np.int64) - az.astype(np.int64).reshape(m, 1)) @
                                  (v.astype(np.int64) - 7)).astype(np.int32)),
              ("y", lambda got: dequantize(got["qmm"], ys, yz))]
    b.node("DequantizeLinear", ["qmm", "y_s", "y_z"], ["y"])
    return b, {"a": a}, stages, w.size + v.size


def check(got, stages):
    """Problems of one run: each stage against its reference fed with clrun's values."""
    problems = []
    for key, reference in stages:
        want = np.asarray(reference(got))
        have = got[key]
        if want.dtype.kind in "iu":
            if have.dtype != want.dtype:
                problems.append(f"{key} is {have.dtype}, expected {want.dtype}")
            elif have.shape != want.shape or not np.array_equal(have, want):
                diff = int(np.sum(have != want)) if have.shape == want.shape else -1
                problems.append(f"{key}: {diff} of {want.size} integers differ")
        else:
            if have.dtype != np.float32 or have.shape != want.shape:
                problems.append(f"{key} is {have.dtype} {have.shape}, expected float32 {want.shape}")
                continue
            err = float(np.max(np.abs(have.astype(np.float64) - want) / np.maximum(1, np.abs(want))))
            if not err <= 1e-5:
                problems.append(f"{key}: error {err:.3g}")
    return problems


def models(rng):
    yield "cnn_u8", *cnn(rng, np.uint8, [(np.int8, False, np.uint8, 16, 1, 1, True, False, 3, 1),
                                         (np.uint8, True, np.int8, 32, 2, 1, False, True, 3, 1),
                                         (np.int8, True, np.int8, 32, 1, 4, True, False, 3, 2),
                                         (np.uint8, False, np.uint8, 16, 1, 1, True, False, 1, 1)])
    yield "cnn_i8", *cnn(rng, np.int8, [(np.uint8, True, np.int8, 16, 1, 2, False, True, 3, 1),
                                        (np.int8, False, np.uint8, 24, 1, 1, True, False, 3, 2),
                                        (np.int8, True, np.uint8, 32, 2, 1, True, False, 3, 1),
                                        (np.int8, True, np.int8, 32, 1, 32, False, False, 3, 1)])
    yield "cnn_dynamic", *cnn_dynamic(rng)
    yield "dynamic", *transformer(rng, "dynamic")
    yield "qlinear", *transformer(rng, "qlinear")
    yield "matmul_forms", *matmul_forms(rng)


# ---- bad quantized nodes ----

def refusals(rng):
    """(name, model, inputs, words): each must be refused, naming its node and the problem."""
    x8 = rng.integers(0, 256, (1, 4, 6, 6), dtype=np.uint8)
    w8 = rng.integers(-128, 128, (8, 4, 3, 3), dtype=np.int8)

    def qconv(name, w=w8, ws=f32(0.01), wz=np.int8(0), yz=np.uint8(128), xz=np.uint8(128), bias=None,
              x=x8, **attrs):
        inits = [init("x_s", f32(0.02)), init("x_z", xz), init("w", w), init("w_s", ws), init("w_z", wz),
                 init("y_s", f32(0.1)), init("y_z", yz)]
        ins = ["x", "x_s", "x_z", "w", "w_s", "w_z", "y_s", "y_z"]
        if bias is not None:
            inits.append(init("b", bias))
            ins.append("b")
        node = helper.make_node("QLinearConv", ins, ["y"], name=name, **attrs)
        return make([node], [vi("x", x.dtype, x.shape)], [vi("y")], inits, opset=13), {"x": x}

    def qmatmul(name, a_dtype=np.uint8, bs=f32(0.01), bz=np.int8(0), az=np.uint8(128)):
        a = rng.integers(0, 100, (3, 8)).astype(a_dtype)
        b = rng.integers(-128, 128, (8, 5), dtype=np.int8)
        inits = [init("a_s", f32(0.02)), init("a_z", az), init("b", b), init("b_s", bs), init("b_z", bz),
                 init("y_s", f32(0.1)), init("y_z", np.int8(0))]
        node = helper.make_node("QLinearMatMul", ["a", "a_s", "a_z", "b", "b_s", "b_z", "y_s", "y_z"], ["y"],
                                name=name)
        return make([node], [vi("a", a.dtype, a.shape)], [vi("y")], inits, opset=13), {"a": a}

    def quant(op, name, x, scale, zero, opset=13, **attrs):
        node = helper.make_node(op, ["x", "s", "z"], ["y"], name=name, **attrs)
        return make([node], [vi("x", x.dtype, x.shape)], [vi("y")], [init("s", scale), init("z", zero)],
                    opset=opset), {"x": x}

    xf = f32(rng.standard_normal((2, 3, 4)))
    cases = [
        ("conv_scale_length", *qconv("conv_scale_length", ws=f32(np.full(7, 0.01))),
         "'conv_scale_length' (QLinearConv", "w_scale has shape [7]"),
        ("conv_zero_type", *qconv("conv_zero_type", wz=np.uint8(0)),
         "'conv_zero_type' (QLinearConv", "w_zero_point is uint8: expected int8"),
        ("conv_zero_length", *qconv("conv_zero_length", wz=np.zeros(5, np.int8)),
         "'conv_zero_length' (QLinearConv", "w_zero_point has shape [5]"),
        ("conv_x_zero_axis", *qconv("conv_x_zero_axis", xz=np.full(4, 128, np.uint8)),
         "'conv_x_zero_axis' (QLinearConv", "x_zero_point has shape [4]"),
        ("conv_y_zero_int32", *qconv("conv_y_zero_int32", yz=np.int32(0)),
         "'conv_y_zero_int32' (QLinearConv", "y_zero_point is int32"),
        ("conv_bias_float", *qconv("conv_bias_float", bias=f32(np.zeros(8))),
         "'conv_bias_float' (QLinearConv", "B is float"),
        ("conv_group", *qconv("conv_group", group=3),
         "'conv_group' (QLinearConv", "groups 3"),
        ("conv_kernel_shape", *qconv("conv_kernel_shape", kernel_shape=[5, 5]),
         "'conv_kernel_shape' (QLinearConv", "kernel_shape does not match"),
        ("conv_auto_pad", *qconv("conv_auto_pad", auto_pad="SOMETIMES"),
         "'conv_auto_pad' (QLinearConv", "auto_pad 'SOMETIMES'"),
        ("conv_float_x", *qconv("conv_float_x", x=f32(x8)),
         "'conv_float_x' (QLinearConv", "x is float"),
        ("matmul_float_a", *qmatmul("matmul_float_a", a_dtype=np.float32),
         "'matmul_float_a' (QLinearMatMul", "a is float"),
        ("matmul_scale_length", *qmatmul("matmul_scale_length", bs=f32(np.full(4, 0.01))),
         "'matmul_scale_length' (QLinearMatMul", "b_scale has shape [4]"),
        ("matmul_a_zero_type", *qmatmul("matmul_a_zero_type", az=np.int8(0)),
         "'matmul_a_zero_type' (QLinearMatMul", "a_zero_point is int8: expected uint8"),
        ("quantize_axis_length", *quant("QuantizeLinear", "quantize_axis_length", xf, f32(np.full(4, 0.1)),
                                        np.zeros(4, np.uint8), axis=1),
         "'quantize_axis_length' (QuantizeLinear", "the scale has 4 values, the input's axis 1 has 3"),
        ("quantize_zero_shape", *quant("QuantizeLinear", "quantize_zero_shape", xf, f32(np.full(3, 0.1)),
                                       np.zeros(2, np.uint8), axis=1),
         "'quantize_zero_shape' (QuantizeLinear", "the zero point has 2 values, the scale 3"),
        ("quantize_int16", *quant("QuantizeLinear", "quantize_int16", xf, f32(0.1), np.int16(0)),
         "'quantize_int16' (QuantizeLinear", "the zero point is int16"),
        ("quantize_block", *quant("QuantizeLinear", "quantize_block", xf, f32(np.full((2, 3, 2), 0.1)),
                                  np.zeros((2, 3, 2), np.uint8), opset=21, axis=2, block_size=2),
         "'quantize_block' (QuantizeLinear", "block_size 2"),
        ("quantize_output_dtype", *quant("QuantizeLinear", "quantize_output_dtype", xf, f32(0.1), np.uint8(0),
                                         opset=21, output_dtype=TensorProto.INT8),
         "'quantize_output_dtype' (QuantizeLinear", "differs from the zero point's type"),
        ("dequantize_zero_type", *quant("DequantizeLinear", "dequantize_zero_type",
                                        rng.integers(0, 9, (2, 3), dtype=np.uint8), f32(0.1), np.int8(0)),
         "'dequantize_zero_type' (DequantizeLinear", "zero point's type differs"),
        ("dequantize_axis_length", *quant("DequantizeLinear", "dequantize_axis_length",
                                          rng.integers(0, 9, (2, 3), dtype=np.uint8), f32(np.full(2, 0.1)),
                                          np.zeros(2, np.uint8), axis=1),
         "'dequantize_axis_length' (DequantizeLinear", "the scale has 2 values, the input's axis 1 has 3"),
    ]
    di = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "ys", "yz"], name="dynamic_int")
    xi = rng.integers(0, 9, (2, 3)).astype(np.int32)
    cases.append(("dynamic_int", make([di], [vi("x", np.int32, xi.shape)], [vi("y")], [], opset=13), {"x": xi},
                  "'dynamic_int' (DynamicQuantizeLinear", "the input is int32"))
    mi = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"], name="matmul_integer_zero")
    ai = rng.integers(0, 9, (3, 4), dtype=np.uint8)
    cases.append(("matmul_integer_zero",
                  make([mi], [vi("a", np.uint8, ai.shape)], [vi("y")],
                       [init("b", rng.integers(0, 9, (4, 5), dtype=np.uint8)), init("az", np.uint8(1)),
                        init("bz", np.zeros(3, np.uint8))], opset=13), {"a": ai},
                  "'matmul_integer_zero' (MatMulInteger", "b_zero_point has shape [3]"))
    # a zero point's type is the output's: a uint8 one where the model declares the value int8
    qn = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["t"], name="quant_declared")
    dn = helper.make_node("DequantizeLinear", ["t", "s", "z"], ["y"], name="dequant")
    declared = make([qn, dn], [vi("x", np.float32, xf.shape)], [vi("y")], [init("s", f32(0.1)), init("z", np.uint8(3))],
                    opset=13)
    declared.graph.value_info.append(helper.make_tensor_value_info("t", TensorProto.INT8, list(xf.shape)))
    cases.append(("quantize_declared", declared, {"x": xf}, "'quant_declared' (QuantizeLinear",
                  "output 0 't' is uint8, but the model's value_info declares int8"))
    return cases


def refusals_hold(clrun, work, cases):
    """Each case refused with its node and its words in the message, and nothing written."""
    ok = True
    for name, m, inputs, node, words in cases:
        got, err = run(clrun, os.path.join(work, "bad_" + name), m, inputs, ["y"])
        if got is not None or node not in err or words not in err:
            print(f"FAIL bad {name}: not refused naming {node} with '{words}': {err if got is None else 'it ran'}")
            ok = False
        elif os.path.exists(os.path.join(work, "bad_" + name, "out")) and \
                os.listdir(os.path.join(work, "bad_" + name, "out")):
            print(f"FAIL bad {name}: refused, but outputs were written")
            ok = False
        else:
            print(f"bad {name}: refused: {err.splitlines()[-1][:150]}")
    return ok


def init(name, value):
    return numpy_helper.from_array(np.asarray(value), name)



def main():
    clrun, work = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(2025)
    failures = 0
    for name, b, inputs, stages, weight_bytes in models(rng):
        keys = [k for k, _ in stages]
        ins = [vi(k, v.dtype, v.shape) for k, v in inputs.items()]
        # the references fed with their own values: the types of the values, and an end-to-end run
        alone = dict(inputs)
        for key, reference in stages:
            alone[key] = np.asarray(reference(alone))
        outs = [vi(k, alone[k].dtype if alone[k].dtype.kind in "iu" else None) for k in keys]
        full = make(b.nodes, ins, outs, b.inits)
        for allocator, env in MODES:
            label = " ".join([name, allocator] + [f"{k}={v}" for k, v in env.items()])
            got, report = run(clrun, os.path.join(work, name), full, inputs, keys, allocator, env)
            problems = [f"clrun run failed: {report}"] if got is None else check(dict(inputs, **got), stages)
            if got is not None and allocator == "tlsf":
                moved = sum(int(np.sum(got[k] != alone[k])) for k in keys if alone[k].dtype.kind in "iu")
                print(f"{name}: end to end against numpy alone, {moved} integers differ (told, not "
                      "checked: a float one ulp away may move a rounding)")
            if got is not None:
                kinds = sorted({str(got[k].dtype) for k in keys})
                print(f"{label}: {len(keys)} values ({', '.join(kinds)}): "
                      f"{'ok' if not problems else 'FAIL: ' + '; '.join(problems[:6])}")
            else:
                print(f"{label}: FAIL: {problems[0]}")
            failures += bool(problems)
        # the model as shipped, y alone: int8 weights resident as int8, the peak of 8-bit values
        lean = make(b.nodes, ins, [vi("y")], b.inits)
        got, report = run(clrun, os.path.join(work, name + "_lean"), lean, inputs, ["y"])
        if got is None:
            print(f"{name} lean: FAIL: {report}")
            failures += 1
            continue
        resident = report["constant_bytes"]
        params = sum(len(t.raw_data) if t.raw_data else np.asarray(numpy_helper.to_array(t)).nbytes
                     for t in b.inits)
        problems = []
        if resident > params + 1024:  # + the few scalars the mapping adds (0 and 255 of a dynamic range)
            problems.append(f"resident constants {resident} bytes, the model's initializers {params}")
        twin = ""
        if b.twin_nodes:  # the same convolutions over the dequantized weights in f32
            _, f32_report = run(clrun, os.path.join(work, name + "_f32"),
                                make(b.twin_nodes, ins, [vi("y")], b.twin_inits), inputs, ["y"])
            twin = f" (f32 twin: resident {f32_report['constant_bytes']}, peak {f32_report['peak_bytes']})"
            if report["peak_bytes"] > f32_report["peak_bytes"]:
                problems.append(f"peak {report['peak_bytes']} above the f32 network's {f32_report['peak_bytes']}")
        print(f"{name} lean: resident {resident} bytes (int8 weights {weight_bytes}, all initializers "
              f"{params}), peak {report['peak_bytes']}{twin}: {'ok' if not problems else 'FAIL: ' + '; '.join(problems)}")
        failures += bool(problems)
    failures += not refusals_hold(clrun, work, refusals(rng))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
