#!/usr/bin/python3
"""BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot (opset 18) on every integer type, broadcast,
LpPool (opsets 1, 2, 11, 18: p, kernel_shape, strides, pads, auto_pad, dilations, ceil_mode;
1-D and 2-D), GlobalLpPool, MaxPool of int8 and uint8 (opset 12, 1-D and 2-D) and AveragePool
with pads the pooling op does not take (beyond half the window, asymmetric) through `clrun run
MODEL.onnx --output-dir`, against a numpy reference of the spec (the backend suite of Debian's
onnx 1.12 has no case of the first ones). Integers
exactly, floats within 1e-5 (relative above 1). Bad input (a float Bitwise input, p below 1, an
integer LpPool input) refused naming the node and the value.
Usage: onnx_bitwise_lppool.py CLRUN WORKDIR"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from onnx_common import close, model, refusals_hold, run, vi

F = TensorProto.FLOAT
TOLERANCE = 1e-5
INTS = {np.int8: TensorProto.INT8, np.uint8: TensorProto.UINT8, np.int16: TensorProto.INT16,
        np.uint16: TensorProto.UINT16, np.int32: TensorProto.INT32, np.uint32: TensorProto.UINT32,
        np.int64: TensorProto.INT64, np.uint64: TensorProto.UINT64}


def random_ints(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


def lp_pool(x, p, kernel, strides, pads, dilations, ceil_mode=False):
    """The spec's LpPool: (sum of |x|^p over each window, zeros in the padding)^(1/p)."""
    sp = len(kernel)
    x = np.abs(x.astype(np.float64)) ** p
    x = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + sp]) for i in range(sp)])
    spans = [(kernel[i] - 1) * dilations[i] + 1 for i in range(sp)]
    outs = []
    for i in range(sp):
        room = x.shape[2 + i] - spans[i]
        outs.append((-(-room // strides[i]) if ceil_mode else room // strides[i]) + 1)
    y = np.zeros(x.shape[:2] + tuple(outs))
    for o in np.ndindex(*outs):
        total = 0
        for k in np.ndindex(*kernel):
            idx = [o[i] * strides[i] + k[i] * dilations[i] for i in range(sp)]
            if all(idx[i] < x.shape[2 + i] for i in range(sp)):
                total = total + x[(slice(None), slice(None)) + tuple(idx)]
        y[(slice(None), slice(None)) + o] = total
    return y ** (1.0 / p)


def max_pool(x, kernel, strides, pads):
    """MaxPool with its padding never chosen (the input's own type kept)."""
    sp = len(kernel)
    outs = [(x.shape[2 + i] + pads[i] + pads[i + sp] - kernel[i]) // strides[i] + 1 for i in range(sp)]
    y = np.zeros(x.shape[:2] + tuple(outs), x.dtype)
    for o in np.ndindex(*outs):
        lo = [max(0, o[i] * strides[i] - pads[i]) for i in range(sp)]
        hi = [min(x.shape[2 + i], o[i] * strides[i] - pads[i] + kernel[i]) for i in range(sp)]
        window = x[(slice(None), slice(None)) + tuple(slice(lo[i], hi[i]) for i in range(sp))]
        y[(slice(None), slice(None)) + o] = window.max(axis=tuple(range(2, 2 + sp)))
    return y


def avg_pool(x, kernel, strides, pads):
    """AveragePool without count_include_pad: each window's mean over its taps inside x."""
    sp = len(kernel)
    outs = [(x.shape[2 + i] + pads[i] + pads[i + sp] - kernel[i]) // strides[i] + 1 for i in range(sp)]
    y = np.zeros(x.shape[:2] + tuple(outs))
    for o in np.ndindex(*outs):
        lo = [max(0, o[i] * strides[i] - pads[i]) for i in range(sp)]
        hi = [min(x.shape[2 + i], o[i] * strides[i] - pads[i] + kernel[i]) for i in range(sp)]
        window = x[(slice(None), slice(None)) + tuple(slice(lo[i], hi[i]) for i in range(sp))].astype(np.float64)
        y[(slice(None), slice(None)) + o] = window.mean(axis=tuple(range(2, 2 + sp)))
    return y


def cases(rng):
    out = []
    ops = {"BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or, "BitwiseXor": np.bitwise_xor}
    for k, (dtype, elem) in enumerate(INTS.items()):
        a = random_ints(rng, dtype, (2, 3, 4))
        b = random_ints(rng, dtype, (3, 1) if k % 2 else (4,))
        for op, ref in ops.items():
            node = helper.make_node(op, ["a", "b"], ["y"])
            out.append((f"{op.lower()}_{np.dtype(dtype).name}",
                        model([node], [vi("a", a.shape, elem), vi("b", b.shape, elem)], [vi("y", None, elem)], 18),
                        {"a": a, "b": b}, {"y": ref(a, b)}))
        node = helper.make_node("BitwiseNot", ["a"], ["y"])
        out.append((f"bitwisenot_{np.dtype(dtype).name}",
                    model([node], [vi("a", a.shape, elem)], [vi("y", None, elem)], 18), {"a": a},
                    {"y": np.bitwise_not(a)}))
    # a constant operand (an initializer) broadcast against a fed one
    a = random_ints(rng, np.int32, (5, 6))
    mask = np.array([0x0F0F0F0F, -1, 0, 0x7FFFFFFF, -0x80000000, 0x55555555], np.int32)
    node = helper.make_node("BitwiseAnd", ["a", "m"], ["y"])
    out.append(("bitwiseand_initializer", model([node], [vi("a", a.shape, TensorProto.INT32)],
                                                [vi("y", None, TensorProto.INT32)], 18,
                                                [numpy_helper.from_array(mask, "m")]),
                {"a": a}, {"y": a & mask}))
    # LpPool: 2-D p=2 with strides and pads (11), p=3 (2), 1-D p=1 (18, dilations), ceil_mode,
    # auto_pad SAME_UPPER, opset 1's float p
    x = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
    x1 = rng.standard_normal((2, 3, 11)).astype(np.float32)
    lp = [
        ("lppool11_2d_p2", x, 11, dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 0, 1]),
         lambda v: lp_pool(v, 2, [3, 2], [2, 1], [1, 0, 0, 1], [1, 1])),
        ("lppool2_2d_p3", x, 2, dict(kernel_shape=[2, 2], p=3),
         lambda v: lp_pool(v, 3, [2, 2], [1, 1], [0, 0, 0, 0], [1, 1])),
        ("lppool1_2d_float_p", x, 1, dict(kernel_shape=[2, 3], p=2.0, strides=[1, 2]),
         lambda v: lp_pool(v, 2, [2, 3], [1, 2], [0, 0, 0, 0], [1, 1])),
        ("lppool18_1d_p1_dilated", x1, 18, dict(kernel_shape=[3], p=1, dilations=[2], pads=[1, 2]),
         lambda v: lp_pool(v, 1, [3], [1], [1, 2], [2])),
        ("lppool18_2d_ceil", x, 18, dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, p=4),
         lambda v: lp_pool(v, 4, [3, 3], [2, 2], [0, 0, 0, 0], [1, 1], ceil_mode=True)),
        ("lppool18_2d_dilated", x, 18, dict(kernel_shape=[2, 2], dilations=[2, 3], strides=[1, 2]),
         lambda v: lp_pool(v, 2, [2, 2], [1, 2], [0, 0, 0, 0], [2, 3])),
        # SAME_UPPER on 7x8, kernel 3, stride 2: outputs 4x4, pads (1,1) and (0,1)
        ("lppool11_same_upper", x, 11, dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
         lambda v: lp_pool(v, 2, [3, 3], [2, 2], [1, 0, 1, 1], [1, 1])),
        ("lppool11_1d_strided", x1, 11, dict(kernel_shape=[4], strides=[3], p=2),
         lambda v: lp_pool(v, 2, [4], [3], [0, 0], [1])),
    ]
    for name, xin, opset, attrs, ref in lp:
        node = helper.make_node("LpPool", ["x"], ["y"], **attrs)
        out.append((name, model([node], [vi("x", xin.shape)], [vi("y", None)], opset), {"x": xin}, {"y": ref(xin)}))
    # MaxPool of int8 and uint8 (opset 12): exact, pads never chosen
    for dtype, elem in ((np.uint8, TensorProto.UINT8), (np.int8, TensorProto.INT8)):
        xi = random_ints(rng, dtype, (2, 3, 7, 6))
        node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 1], pads=[1, 1, 1, 0])
        out.append((f"maxpool12_2d_{np.dtype(dtype).name}",
                    model([node], [vi("x", xi.shape, elem)], [vi("y", None, elem)], 12), {"x": xi},
                    {"y": max_pool(xi, [3, 2], [2, 1], [1, 1, 1, 0])}))
        x1i = random_ints(rng, dtype, (2, 2, 9))
        node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[4], strides=[2], pads=[2, 1])
        out.append((f"maxpool12_1d_{np.dtype(dtype).name}",
                    model([node], [vi("x", x1i.shape, elem)], [vi("y", None, elem)], 12), {"x": x1i},
                    {"y": max_pool(x1i, [4], [2], [2, 1])}))
    # AveragePool without count_include_pad, pads beyond half the window or asymmetric: the
    # mean over the taps inside the input
    for name, xin, kernel, strides, pads in [
            ("averagepool11_pads_beyond_half", x, [3, 3], [1, 1], [2, 2, 2, 2]),
            ("averagepool11_asymmetric_strided", x, [2, 3], [2, 2], [0, 2, 1, 0]),
            ("averagepool11_1d_pads_beyond_half", x1, [3], [2], [2, 1])]:
        node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=kernel, strides=strides, pads=pads)
        out.append((name, model([node], [vi("x", xin.shape)], [vi("y", None)], 11), {"x": xin},
                    {"y": avg_pool(xin, kernel, strides, pads)}))
    for p in (1, 2, 3):
        node = helper.make_node("GlobalLpPool", ["x"], ["y"], p=p)
        want = (np.abs(x.astype(np.float64)) ** p).sum(axis=(2, 3), keepdims=True) ** (1.0 / p)
        out.append((f"globallppool2_p{p}", model([node], [vi("x", x.shape)], [vi("y", None)], 2), {"x": x},
                    {"y": want}))
    return out


def refusals():
    """(name, model, inputs, the words the refusal must hold)."""
    out = []
    xf = np.ones((4,), np.float32)
    node = helper.make_node("BitwiseOr", ["x", "x"], ["y"], name="or_node")
    out.append(("bitwiseor_float", model([node], [vi("x", [4])], [vi("y", None)], 18), {"x": xf},
                "input 0 'x' is float: BitwiseOr takes integers"))
    node = helper.make_node("BitwiseNot", ["x"], ["y"], name="not_node")
    out.append(("bitwisenot_bool", model([node], [vi("x", [4], TensorProto.BOOL)], [vi("y", None, TensorProto.BOOL)], 18),
                {"x": np.array([True, False, True, True])}, "input 0 'x' is bool: BitwiseNot takes integers"))
    x4 = np.ones((1, 2, 4, 4), np.float32)
    node = helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2, 2], p=0, name="lp_node")
    out.append(("lppool_p0", model([node], [vi("x", x4.shape)], [vi("y", None)], 11), {"x": x4},
                "attribute 'p' is 0: it must be at least 1"))
    node = helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2, 2])
    out.append(("lppool_int", model([node], [vi("x", x4.shape, TensorProto.INT32)], [vi("y", None, TensorProto.INT32)], 11),
                {"x": x4.astype(np.int32)}, "input 0 'x' is int32: LpPool takes floats"))
    node = helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2, 2, 2])
    out.append(("lppool_3d", model([node], [vi("x", [1, 1, 3, 3, 3])], [vi("y", None)], 11),
                {"x": np.ones((1, 1, 3, 3, 3), np.float32)}, "3-D LpPool is not supported"))
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], pads=[3, 0, 0, 0])
    out.append(("averagepool_window_in_padding", model([node], [vi("x", x4.shape)], [vi("y", None)], 11),
                {"x": x4}, "lies entirely in the padding"))
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2, 2])
    out.append(("maxpool_uint8_3d", model([node], [vi("x", [1, 1, 3, 3, 3], TensorProto.UINT8)],
                                          [vi("y", None, TensorProto.UINT8)], 12),
                {"x": np.ones((1, 1, 3, 3, 3), np.uint8)}, "MaxPool of int8 or uint8 is supported in 1-D and 2-D"))
    return out


def main():
    clrun, work = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(20261205)
    ok = True
    for name, m, inputs, expected in cases(rng):
        got, err = run(clrun, os.path.join(work, name), m, inputs, list(expected))
        if got is None:
            print(f"FAIL {name}: {err}")
            ok = False
            continue
        bad = [f"{k}: {what}" for k, want in expected.items()
               for fine, what in [close(got[k], np.asarray(want), TOLERANCE)] if not fine]
        print(f"FAIL {name}: {'; '.join(bad)}" if bad else f"PASS {name}")
        ok = ok and not bad
    ok = refusals_hold(clrun, work, refusals()) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
