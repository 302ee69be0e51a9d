#!/usr/bin/python3
"""Real models through clrun: three networks built here with the onnx package (random weights
as initializers, shapes and layouts as PyTorch exports them), each run by `clrun run
MODEL.onnx --input ... --output-dir` under every allocator mode and compared with a numpy
reference of the same network:

  mobilenet  a MobileNetV3-style CNN: Conv + BatchNormalization + HardSwish stem, inverted
             residual blocks (1x1 expand, Clip(0, 6), depthwise 3x3, squeeze-excite with
             GlobalAveragePool and HardSigmoid, 1x1 project, residual Add), a Flatten + Gemm head
  detect     a detection head: two feature maps, lateral 1x1 convs, Resize (nearest, x2) and Add,
             a ConvTranspose upsampling, Sigmoid class scores and box outputs reshaped and
             transposed to [N, anchors, 4]
  transformer a small transformer encoder exported-style: batch and sequence symbolic, every
             Reshape's shape computed from Shape -> Gather -> Unsqueeze -> Concat, attention
             with a causal mask built by Range / Less / Where, LayerNorm decomposed into
             ReduceMean, Sub, Pow, Sqrt, Div, and GELU as Erf

Each output must be within 1e-3 of the reference relative to the output's largest magnitude,
and bit-identical across buddy, slab, bump, naive and planned. A model that needs a graph op
this build lacks is reported and skipped (its refusal names the op); any other refusal, a
failed run or a wrong answer fails. Usage: onnx_models.py CLRUN WORKDIR"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_common import some_modes

RNG = np.random.default_rng(20261201)
MODES = some_modes(["buddy", "slab", "bump", "naive", "planned"])


class Builder:
    """Nodes, initializers and unique names, as an exporter would emit them."""

    def __init__(self, name):
        self.name = name
        self.nodes, self.inits = [], []
        self.count = 0

    def fresh(self, stem):
        self.count += 1
        return f"{stem}_{self.count}"

    def init(self, array, stem="w"):
        name = self.fresh(stem)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type, inputs, n_out=1, **attrs):
        outs = [self.fresh(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.fresh(op_type), **attrs))
        return outs[0] if n_out == 1 else outs

    def model(self, inputs, outputs, opset=14):
        graph = helper.make_graph(self.nodes, self.name, inputs, outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="clrun-tests")
        onnx.checker.check_model(m)
        return m


def weights(*shape, scale=None):
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
    return (RNG.standard_normal(shape) * (scale or 1 / np.sqrt(fan_in))).astype(np.float32)


# ---- numpy references ----

def conv2d(x, w, b=None, stride=1, pad=0, groups=1, dilation=1):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - dilation * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * pad - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        ws = w[g * og:(g + 1) * og].astype(np.float64)
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dilation:i * dilation + stride * oh:stride,
                           j * dilation:j * dilation + stride * ow:stride]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def conv_transpose2d(x, w, b=None, stride=2, pad=1):
    n, c, h, wd = x.shape
    _, o, kh, kw = w.shape
    full = np.zeros((n, o, (h - 1) * stride + kh, (wd - 1) * stride + kw))
    for i in range(h):
        for j in range(wd):
            full[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw] += np.einsum(
                "nc,cokl->nokl", x[:, :, i, j].astype(np.float64), w.astype(np.float64))
    out = full[:, :, pad:full.shape[2] - pad, pad:full.shape[3] - pad]
    if b is not None:
        out = out + b.reshape(1, -1, 1, 1)
    return out


def hard_sigmoid(x, alpha=0.2, beta=0.5):
    return np.clip(alpha * x + beta, 0, 1)


def hard_swish(x):
    return x * hard_sigmoid(x, 1 / 6, 0.5)


def batchnorm(x, scale, bias, mean, var, eps=1e-5):
    s = (scale / np.sqrt(var + eps)).reshape(1, -1, 1, 1)
    return (x - mean.reshape(1, -1, 1, 1)) * s + bias.reshape(1, -1, 1, 1)


def erf(x):
    """erf to double precision (Abramowitz-Stegun 7.1.26 is too coarse): by math.erf."""
    import math
    return np.vectorize(math.erf)(x)


# ---- mobilenet ----

def mobilenet():
    b = Builder("mobilenet")
    ref = {}
    params = []  # (name, array) in order, for the reference

    def conv_bn(x_name, x, cin, cout, k, stride, groups, act):
        w = weights(cout, cin // groups, k, k)
        scale = (1 + 0.1 * RNG.standard_normal(cout)).astype(np.float32)
        bias = (0.1 * RNG.standard_normal(cout)).astype(np.float32)
        mean = (0.1 * RNG.standard_normal(cout)).astype(np.float32)
        var = (0.5 + RNG.random(cout)).astype(np.float32)
        y = b.op("Conv", [x_name, b.init(w)], kernel_shape=[k, k], strides=[stride, stride],
                 pads=[k // 2] * 4, group=groups)
        y = b.op("BatchNormalization", [y, b.init(scale), b.init(bias), b.init(mean), b.init(var)],
                 epsilon=1e-5)
        v = batchnorm(conv2d(x, w, stride=stride, pad=k // 2, groups=groups), scale, bias, mean, var)
        if act == "hswish":
            y, v = b.op("HardSwish", [y]), hard_swish(v)
        elif act == "relu6":
            y = b.op("Clip", [y, b.init(np.array(0, np.float32)), b.init(np.array(6, np.float32))])
            v = np.clip(v, 0, 6)
        return y, v

    x = RNG.standard_normal((1, 3, 32, 32)).astype(np.float32)
    h, v = conv_bn("image", x, 3, 16, 3, 2, 1, "hswish")
    c = 16
    for i, (exp, cout, stride) in enumerate([(32, 16, 1), (48, 24, 2), (72, 24, 1), (72, 24, 1),
                                             (96, 32, 2), (128, 32, 1), (128, 32, 1), (160, 40, 1),
                                             (160, 40, 1), (192, 48, 2), (192, 48, 1), (192, 48, 1)]):
        inp, vin = h, v
        e, ve = conv_bn(h, v, c, exp, 1, 1, 1, "relu6")
        d, vd = conv_bn(e, ve, exp, exp, 3, stride, exp, "hswish")
        # squeeze-excite: GAP, 1x1 reduce, Relu, 1x1 expand, HardSigmoid, Mul
        w1, b1 = weights(exp // 4, exp, 1, 1), (0.1 * RNG.standard_normal(exp // 4)).astype(np.float32)
        w2, b2 = weights(exp, exp // 4, 1, 1), (0.1 * RNG.standard_normal(exp)).astype(np.float32)
        s = b.op("GlobalAveragePool", [d])
        s = b.op("Conv", [s, b.init(w1), b.init(b1)], kernel_shape=[1, 1])
        s = b.op("Relu", [s])
        s = b.op("Conv", [s, b.init(w2), b.init(b2)], kernel_shape=[1, 1])
        s = b.op("HardSigmoid", [s], alpha=1 / 6, beta=0.5)
        d = b.op("Mul", [d, s])
        vs = vd.mean(axis=(2, 3), keepdims=True)
        vs = np.maximum(conv2d(vs, w1, b1), 0)
        vs = hard_sigmoid(conv2d(vs, w2, b2), 1 / 6, 0.5)
        vd = vd * vs
        h, v = conv_bn(d, vd, exp, cout, 1, 1, 1, None)
        if stride == 1 and cout == c:
            h, v = b.op("Add", [h, inp]), v + vin
        c = cout
    g = b.op("GlobalAveragePool", [h])
    f = b.op("Flatten", [g], axis=1)
    wf, bf = weights(10, c), (0.1 * RNG.standard_normal(10)).astype(np.float32)
    logits = b.op("Gemm", [f, b.init(wf), b.init(bf)], transB=1)
    vf = v.mean(axis=(2, 3)) @ wf.T.astype(np.float64) + bf
    b.nodes[-1].output[0] = "logits"
    model = b.model([helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 32])],
                    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])])
    return model, {"image": x}, {"logits": vf}


# ---- detection head ----

def detect():
    b = Builder("detect")
    p3 = RNG.standard_normal((1, 16, 8, 8)).astype(np.float32)
    p4 = RNG.standard_normal((1, 32, 4, 4)).astype(np.float32)
    wl3, bl3 = weights(24, 16, 1, 1), (0.1 * RNG.standard_normal(24)).astype(np.float32)
    wl4, bl4 = weights(24, 32, 1, 1), (0.1 * RNG.standard_normal(24)).astype(np.float32)
    l3 = b.op("Conv", ["p3", b.init(wl3), b.init(bl3)], kernel_shape=[1, 1])
    l4 = b.op("Conv", ["p4", b.init(wl4), b.init(bl4)], kernel_shape=[1, 1])
    up = b.op("Resize", [l4, "", b.init(np.array([1, 1, 2, 2], np.float32))], mode="nearest",
              coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    m = b.op("Add", [l3, up])
    v3, v4 = conv2d(p3, wl3, bl3), conv2d(p4, wl4, bl4)
    vm = v3 + np.repeat(np.repeat(v4, 2, axis=2), 2, axis=3)
    wt, bt = weights(24, 12, 4, 4, scale=0.1), (0.1 * RNG.standard_normal(12)).astype(np.float32)
    u = b.op("ConvTranspose", [m, b.init(wt), b.init(bt)], kernel_shape=[4, 4], strides=[2, 2],
             pads=[1, 1, 1, 1])
    u = b.op("Relu", [u])
    vu = np.maximum(conv_transpose2d(vm, wt, bt, 2, 1), 0)  # [1, 12, 16, 16]
    anchors = 3
    wc, bc = weights(anchors * 2, 12, 3, 3), (0.1 * RNG.standard_normal(anchors * 2)).astype(np.float32)
    wb, bb = weights(anchors * 4, 12, 3, 3), (0.1 * RNG.standard_normal(anchors * 4)).astype(np.float32)
    cls = b.op("Conv", [u, b.init(wc), b.init(bc)], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    box = b.op("Conv", [u, b.init(wb), b.init(bb)], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    scores = b.op("Sigmoid", [cls])
    # boxes: [1, A*4, H, W] -> [1, A, 4, H*W] -> [1, A, H*W, 4] -> [1, A*H*W, 4]
    box = b.op("Reshape", [box, b.init(np.array([1, anchors, 4, 256], np.int64), "shape")])
    box = b.op("Transpose", [box], perm=[0, 1, 3, 2])
    box = b.op("Reshape", [box, b.init(np.array([1, -1, 4], np.int64), "shape")])
    b.nodes[-1].output[0] = "boxes"
    scores_out = b.op("Concat", [scores, scores], axis=1)
    b.nodes[-1].output[0] = "scores"
    vc = 1 / (1 + np.exp(-conv2d(vu, wc, bc, pad=1)))
    vb = conv2d(vu, wb, bb, pad=1).reshape(1, anchors, 4, 256).transpose(0, 1, 3, 2).reshape(1, -1, 4)
    del scores_out
    model = b.model([helper.make_tensor_value_info("p3", TensorProto.FLOAT, [1, 16, 8, 8]),
                     helper.make_tensor_value_info("p4", TensorProto.FLOAT, [1, 32, 4, 4])],
                    [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 12, 16, 16]),
                     helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 768, 4])])
    return model, {"p3": p3, "p4": p4}, {"scores": np.concatenate([vc, vc], axis=1), "boxes": vb}


# ---- transformer ----

def transformer():
    b = Builder("transformer")
    batch, seq, d, heads, layers, ff = 2, 7, 32, 4, 3, 64
    dh = d // heads
    x = RNG.standard_normal((batch, seq, d)).astype(np.float32)

    def const_i64(values):
        return b.init(np.array(values, np.int64), "const")

    def dim(name_of_shape, i):  # Shape -> Gather(i) -> Unsqueeze: as torch.onnx writes size(i)
        g = b.op("Gather", [name_of_shape, b.init(np.array(i, np.int64), "idx")], axis=0)
        return b.op("Unsqueeze", [g, const_i64([0])])

    def layernorm(h, v):
        gamma = (1 + 0.1 * RNG.standard_normal(d)).astype(np.float32)
        beta = (0.1 * RNG.standard_normal(d)).astype(np.float32)
        mean = b.op("ReduceMean", [h], axes=[-1], keepdims=1)
        c = b.op("Sub", [h, mean])
        var = b.op("ReduceMean", [b.op("Pow", [c, b.init(np.array(2, np.float32))])], axes=[-1], keepdims=1)
        den = b.op("Sqrt", [b.op("Add", [var, b.init(np.array(1e-5, np.float32))])])
        y = b.op("Add", [b.op("Mul", [b.op("Div", [c, den]), b.init(gamma)]), b.init(beta)])
        vm = v.mean(-1, keepdims=True)
        vv = ((v - vm) ** 2).mean(-1, keepdims=True)
        return y, (v - vm) / np.sqrt(vv + 1e-5) * gamma + beta

    def linear(h, v, cin, cout):
        w, bias = weights(cin, cout), (0.1 * RNG.standard_normal(cout)).astype(np.float32)
        return (b.op("Add", [b.op("MatMul", [h, b.init(w)]), b.init(bias)]), v @ w.astype(np.float64) + bias)

    h, v = "x", x.astype(np.float64)
    # The causal mask, from the sequence length: Range, Unsqueeze, Less, Where (folded at load).
    shape = b.op("Shape", ["x"])
    n_seq = b.op("Gather", [shape, b.init(np.array(1, np.int64), "idx")], axis=0)
    pos = b.op("Range", [b.init(np.array(0, np.int64)), n_seq, b.init(np.array(1, np.int64))])
    rows = b.op("Unsqueeze", [pos, const_i64([1])])
    cols = b.op("Unsqueeze", [pos, const_i64([0])])
    future = b.op("Less", [rows, cols])
    mask = b.op("Where", [future, b.init(np.array(-1e4, np.float32)), b.init(np.array(0, np.float32))])
    vmask = np.where(np.arange(seq)[:, None] < np.arange(seq)[None, :], -1e4, 0.0)
    for _ in range(layers):
        s = b.op("Shape", [h])
        nb, ns = dim(s, 0), dim(s, 1)
        split_shape = b.op("Concat", [nb, ns, const_i64([heads]), const_i64([dh])], axis=0)
        qkv = []
        for _part in range(3):
            t, vt = linear(h, v, d, d)
            t = b.op("Transpose", [b.op("Reshape", [t, split_shape])], perm=[0, 2, 1, 3])
            qkv.append((t, vt.reshape(batch, seq, heads, dh).transpose(0, 2, 1, 3)))
        (q, vq), (k, vk), (val, vv) = qkv
        # scale 1 / sqrt(dh) from the shape, as exporters compute it
        hd = b.op("Cast", [b.op("Gather", [b.op("Shape", [q]), b.init(np.array(3, np.int64), "idx")], axis=0)],
                  to=TensorProto.FLOAT)
        scale = b.op("Sqrt", [hd])
        scores = b.op("Div", [b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])]), scale])
        scores = b.op("Add", [scores, mask])
        attn = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), val])
        vs = vq @ vk.transpose(0, 1, 3, 2) / np.sqrt(dh) + vmask
        vs = np.exp(vs - vs.max(-1, keepdims=True))
        vs = vs / vs.sum(-1, keepdims=True)
        va = vs @ vv
        merge_shape = b.op("Concat", [nb, ns, const_i64([d])], axis=0)
        a = b.op("Reshape", [b.op("Transpose", [attn], perm=[0, 2, 1, 3]), merge_shape])
        va = va.transpose(0, 2, 1, 3).reshape(batch, seq, d)
        a, va = linear(a, va, d, d)
        h, v = layernorm(b.op("Add", [h, a]), v + va)
        f, vf = linear(h, v, d, ff)
        # GELU as torch.onnx writes it: x * 0.5 * (1 + erf(x / sqrt(2)))
        g = b.op("Erf", [b.op("Div", [f, b.init(np.array(np.sqrt(2), np.float32))])])
        f = b.op("Mul", [b.op("Mul", [f, b.op("Add", [g, b.init(np.array(1, np.float32))])]),
                         b.init(np.array(0.5, np.float32))])
        vf = vf * 0.5 * (1 + erf(vf / np.sqrt(2)))
        f, vf = linear(f, vf, ff, d)
        h, v = layernorm(b.op("Add", [h, f]), v + vf)
    b.nodes[-1].output[0] = "hidden"
    model = b.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", d])],
                    [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "sequence", d])])
    return model, {"x": x}, {"hidden": v}


# ---- running ----

def run_model(clrun, work, name, model, inputs, expected):
    folder = os.path.join(work, name)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    onnx.save(model, path)
    args = []
    for key, value in inputs.items():
        np.save(os.path.join(folder, key + ".npy"), value)
        args += ["--input", f"{key}={os.path.join(folder, key + '.npy')}"]
        if any(isinstance(d.dim_param, str) and d.dim_param for i in model.graph.input if i.name == key
               for d in i.type.tensor_type.shape.dim):
            args += ["--shape", f"{key}={'x'.join(str(s) for s in value.shape)}"]
    nodes = len(model.graph.node)
    results = {}
    for mode in MODES:
        out = os.path.join(folder, "out-" + mode)
        proc = subprocess.run([clrun, "run", path, "--allocator", mode, "--repeat", "1", "--output-dir", out] + args,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            if "this build of clrun does not have" in proc.stderr:
                print(f"SKIP {name} ({nodes} nodes): {proc.stderr.strip()}")
                return True
            print(f"FAIL {name} ({mode}): exit {proc.returncode}: {proc.stderr.strip()}")
            return False
        results[mode] = {k: np.load(os.path.join(out, k + ".npy")) for k in expected}
    ok = True
    for key, want in expected.items():
        got = results["buddy"][key]
        if got.shape != want.shape:
            print(f"FAIL {name}: output {key} has shape {got.shape}, expected {want.shape}")
            return False
        err = np.abs(got.astype(np.float64) - want).max() / max(np.abs(want).max(), 1e-30)
        if not err <= 1e-3:
            print(f"FAIL {name}: output {key} differs from the numpy reference by {err:.3g} of its scale")
            ok = False
        for mode in MODES[1:]:
            if results[mode][key].tobytes() != got.tobytes():
                print(f"FAIL {name}: output {key} under {mode} differs from buddy (not bit-identical)")
                ok = False
        if ok:
            print(f"PASS {name} ({nodes} nodes): {key} {tuple(got.shape)} within {err:.2g} of the reference "
                  f"(relative to its largest magnitude), identical in {', '.join(MODES)}")
    return ok


def main():
    clrun, work = sys.argv[1], sys.argv[2]
    ok = True
    for name, make in [("mobilenet", mobilenet), ("detect", detect), ("transformer", transformer)]:
        model, inputs, expected = make()
        ok = run_model(clrun, work, name, model, inputs, expected) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
