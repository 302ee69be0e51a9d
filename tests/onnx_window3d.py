#!/usr/bin/python3
"""3-D ConvTranspose through `clrun run MODEL.onnx --output-dir` (lowered to 2-D transposed
convolutions of depth slices, lib/onnx/map_window3d.c), against a numpy reference of the spec in
double precision: strides, dilations, explicit and asymmetric pads, output_padding (output depths
no input reaches: the bias alone), output_shape, auto_pad SAME_UPPER, groups and a bias. Each
output within 1e-5 (relative above 1). Bad input (weights of the wrong rank, an output with no
depth) refused naming the node.
Usage: onnx_window3d.py CLRUN WORKDIR"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from onnx_common import init, model, refusals_hold, run, vi

F = TensorProto.FLOAT
TOLERANCE = 1e-5


def conv_transpose(x, w, b, strides, dilations, pads, out_pad, group):
    """The spec's transposed convolution: every input element times every tap added at
    in * stride + tap * dilation of the full output, then pads cut from its two ends."""
    n, c = x.shape[:2]
    m = w.shape[1] * group
    spatial = x.shape[2:]
    full = [(i - 1) * s + (k - 1) * d + 1 + o for i, k, s, d, o in zip(spatial, w.shape[2:], strides, dilations, out_pad)]
    y = np.zeros((n, m) + tuple(full))
    cg, mg = c // group, m // group
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    for g in range(group):
        xs = x64[:, g * cg:(g + 1) * cg]
        for kd in range(w.shape[2]):
            for kh in range(w.shape[3]):
                for kw in range(w.shape[4]):
                    tap = w64[g * cg:(g + 1) * cg, :, kd, kh, kw]  # [cg, mg]
                    part = np.einsum("ncdhw,cm->nmdhw", xs, tap)
                    z0, h0, w0 = kd * dilations[0], kh * dilations[1], kw * dilations[2]
                    y[:, g * mg:(g + 1) * mg,
                      z0:z0 + (spatial[0] - 1) * strides[0] + 1:strides[0],
                      h0:h0 + (spatial[1] - 1) * strides[1] + 1:strides[1],
                      w0:w0 + (spatial[2] - 1) * strides[2] + 1:strides[2]] += part
    y = y[:, :, pads[0]:full[0] - pads[3], pads[1]:full[1] - pads[4], pads[2]:full[2] - pads[5]]
    if b is not None:
        y = y + b.astype(np.float64).reshape(1, -1, 1, 1, 1)
    return y


def cases(rng):
    out = []
    specs = [
        # name, x shape, (C, M/g, KD, KH, KW), attributes, reference geometry
        ("plain", (1, 2, 3, 4, 5), (2, 3, 3, 3, 3), {}, ([1] * 3, [1] * 3, [0] * 6, [0] * 3, 1)),
        ("stride_pads_bias", (2, 3, 4, 3, 5), (3, 2, 3, 2, 3), {"strides": [2, 1, 2], "pads": [1, 0, 1, 1, 1, 0]},
         ([2, 1, 2], [1] * 3, [1, 0, 1, 1, 1, 0], [0] * 3, 1)),
        ("dilated_output_padding", (1, 2, 3, 3, 3), (2, 2, 2, 2, 2),
         {"strides": [3, 2, 2], "dilations": [2, 1, 2], "output_padding": [2, 1, 0]},
         ([3, 2, 2], [2, 1, 2], [0] * 6, [2, 1, 0], 1)),
        ("groups", (1, 4, 3, 4, 4), (4, 3, 2, 3, 3), {"group": 2, "strides": [1, 2, 2], "pads": [0, 1, 1, 0, 1, 1]},
         ([1, 2, 2], [1] * 3, [0, 1, 1, 0, 1, 1], [0] * 3, 2)),
        ("stride_over_kernel", (1, 1, 3, 2, 2), (1, 2, 1, 1, 1), {"strides": [3, 2, 2]},
         ([3, 2, 2], [1] * 3, [0] * 6, [0] * 3, 1)),
        # one input depth: the second output depth is reached by no tap (the bias alone)
        ("depth_one_bias_only", (1, 2, 1, 3, 3), (2, 2, 1, 2, 2),
         {"strides": [3, 1, 1], "output_padding": [2, 0, 0], "pads": [1, 0, 0, 0, 0, 0]},
         ([3, 1, 1], [1] * 3, [1, 0, 0, 0, 0, 0], [2, 0, 0], 1)),
    ]
    for name, xs, ws, attrs, (strides, dil, pads, out_pad, group) in specs:
        x = rng.standard_normal(xs).astype(np.float32)
        w = rng.standard_normal(ws).astype(np.float32)
        b = rng.standard_normal(ws[1] * group).astype(np.float32) if name != "plain" else None
        node = helper.make_node("ConvTranspose", ["x", "w"] + (["b"] if b is not None else []), ["y"], **attrs)
        inits = [numpy_helper.from_array(w, "w")] + ([numpy_helper.from_array(b, "b")] if b is not None else [])
        out.append((name, model(node, [vi("x", list(xs))], [vi("y", None)], 13, inits), {"x": x},
                    conv_transpose(x, w, b, strides, dil, pads, out_pad, group)))
    # output_shape and SAME_UPPER: the spec's total padding, split as it says
    x = rng.standard_normal((1, 2, 3, 3, 4)).astype(np.float32)
    w = rng.standard_normal((2, 2, 3, 3, 3)).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2, 2], output_shape=[6, 7, 8])
    # full 7, 7, 9: totals 1, 0, 1; the larger half first (NOTSET with output_shape)
    out.append(("output_shape", model(node, [vi("x", list(x.shape))], [vi("y", None)], 13, [init("w", w)]),
                {"x": x},
                conv_transpose(x, w, None, [2] * 3, [1] * 3, [1, 0, 1, 0, 0, 0], [0] * 3, 1)))
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2, 2], auto_pad="SAME_UPPER")
    # wanted 6, 6, 8 of full 7, 7, 9: SAME_UPPER puts the smaller half (0) first
    out.append(("same_upper", model(node, [vi("x", list(x.shape))], [vi("y", None)], 13, [init("w", w)]),
                {"x": x},
                conv_transpose(x, w, None, [2] * 3, [1] * 3, [0, 0, 0, 1, 1, 1], [0] * 3, 1)))
    return out


def refusals():
    x = np.ones((1, 2, 3, 3, 3), np.float32)
    out = []
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"])
    out.append(("weights_rank", model(node, [vi("x", list(x.shape))], [vi("y", None)], 13,
                                      [numpy_helper.from_array(np.ones((2, 2, 3, 3), np.float32), "w")]),
                {"x": x}, "W has rank 4 for an input of rank 5"))
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], pads=[3, 0, 0, 3, 0, 0])
    out.append(("no_depth", model(node, [vi("x", list(x.shape))], [vi("y", None)], 13,
                                  [numpy_helper.from_array(np.ones((2, 2, 2, 2, 2), np.float32), "w")]),
                {"x": x}, "(ConvTranspose, opset 13): the output has no depth"))
    return out


def main():
    clrun, work = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(20261205)
    ok = True
    for name, m, inputs, want in cases(rng):
        got, err = run(clrun, os.path.join(work, name), m, inputs, ["y"])
        got = got["y"] if got else None
        if got is None:
            print(f"FAIL {name}: {err}")
            ok = False
            continue
        if got.shape != want.shape:
            print(f"FAIL {name}: shape {got.shape}, expected {want.shape}")
            ok = False
            continue
        worst = float((np.abs(got - want) / np.maximum(1.0, np.abs(want))).max())
        if not worst <= TOLERANCE:
            print(f"FAIL {name}: largest error {worst:.3g}")
            ok = False
        else:
            print(f"PASS {name}: {got.shape}, largest error {worst:.2g}")
    ok = refusals_hold(clrun, work, refusals()) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
