#!/usr/bin/python3
"""Opsets 18 to 21 through clrun (`clrun run MODEL.onnx --input ... --output-dir`): small models
written here with the onnx package's helpers at the opset each change came in (Debian's onnx 1.12
knows opset 17, so the opset import is set by hand and the checker is not run), each against a
numpy reference of the spec:

  18  the reductions' axes as input 1 (all nine that moved), Split's num_outputs, Pad's axes
      input, Resize's axes and keep_aspect_ratio_policy, Col2Im, CenterCropPad, GroupNormalization
      (scale and bias per group), Mish, ScatterElements with a reduction, ScatterND and
      ScatterElements with reductions max and min (indices known at load)
  19  Pad's wrap mode, Resize's half_pixel_symmetric (an exact output size), AveragePool with
      dilations (of 1; 2-D without pads; 1-D with pads that count), Cast with saturate, Equal
  20  Gelu (approximate none and tanh), IsInf and IsNaN, ConstantOfShape, GridSample's new mode
      names (the same bits as opset 16's names), ReduceMax
  21  GroupNormalization (scale and bias per channel), Quantize/DequantizeLinear per axis with
      output_dtype, and the ops whose version only added types (Shape, Size, Reshape, Flatten,
      Squeeze, Unsqueeze, Transpose, Identity, ConstantOfShape)

and what clrun does not do there refused by name, never run with older semantics: a reduction's
axes as an attribute at 18, Resize's antialias, ScatterND's max reduction with an element
updated twice or indices fed at run time, AveragePool's
dilations with pads that do not count, a float8 Cast, blocked quantization, a BitwiseAnd of floats, DeformConv, a model of opset 22.
Floats within 1e-5 (relative above 1), integers and booleans exactly.
Resize's tf_crop_and_resize (opset 11 on; its roi over opset 18's axes) against the onnx
package's own reference (onnx.backend.test.case.node.resize).
Usage: onnx_opset18.py CLRUN WORKDIR"""
import math
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from onnx_common import close, init, model, refusals_hold, run, vi
from onnx.backend.test.case.node import resize as resize_ref

F = TensorProto.FLOAT
TOLERANCE = 1e-5


# ---- numpy references of the spec ----

def resize_linear(x, sizes, scales):
    """half_pixel linear, separable: x_original = (x + 0.5) / scale - 0.5, neighbours clamped."""
    y = x.astype(np.float64)
    for axis, (out, scale) in enumerate(zip(sizes, scales)):
        n = y.shape[axis]
        if out == n and scale == 1:
            continue
        xo = (np.arange(out) + 0.5) / scale - 0.5
        i0 = np.floor(xo).astype(np.int64)
        r = xo - i0
        a = np.take(y, np.clip(i0, 0, n - 1), axis=axis)
        b = np.take(y, np.clip(i0 + 1, 0, n - 1), axis=axis)
        shape = [1] * y.ndim
        shape[axis] = out
        r = r.reshape(shape)
        y = a * (1 - r) + b * r
    return y


def col2im(col, image, block, strides, pads, dilations):
    n, ck, _ = col.shape
    c = ck // (block[0] * block[1])
    out = np.zeros((n, c, image[0], image[1]))
    oh = (image[0] + pads[0] + pads[2] - dilations[0] * (block[0] - 1) - 1) // strides[0] + 1
    ow = (image[1] + pads[1] + pads[3] - dilations[1] * (block[1] - 1) - 1) // strides[1] + 1
    for ch in range(c):
        for i in range(block[0]):
            for j in range(block[1]):
                row = (ch * block[0] + i) * block[1] + j
                for p in range(oh):
                    for q in range(ow):
                        h = p * strides[0] - pads[0] + i * dilations[0]
                        w = q * strides[1] - pads[1] + j * dilations[1]
                        if 0 <= h < image[0] and 0 <= w < image[1]:
                            out[:, ch, h, w] += col[:, row, p * ow + q]
    return out


def group_norm(x, groups, scale, bias, eps, per_channel):
    n, c = x.shape[:2]
    g = x.astype(np.float64).reshape(n, groups, -1)
    g = (g - g.mean(axis=2, keepdims=True)) / np.sqrt(g.var(axis=2, keepdims=True) + eps)
    if not per_channel:
        g = g * scale.reshape(1, groups, 1) + bias.reshape(1, groups, 1)
        return g.reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    return g.reshape(x.shape) * scale.reshape(shape) + bias.reshape(shape)


def center_crop_pad(x, shape, axes):
    y = x
    for a, target in zip(axes, shape):
        dim = y.shape[a]
        if target < dim:
            start = (dim - target) // 2
            y = np.take(y, np.arange(start, start + target), axis=a)
        elif target > dim:
            lead = (target - dim) // 2
            widths = [(0, 0)] * y.ndim
            widths[a] = (lead, target - dim - lead)
            y = np.pad(y, widths)
    return y


def dilated_average(x, kernel, strides, dilations, pads):
    """2-D average over dilated windows of x padded with zeros that count (pads: top, left,
    bottom, right)."""
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])])
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    oh = (xp.shape[2] - span[0]) // strides[0] + 1
    ow = (xp.shape[3] - span[1]) // strides[1] + 1
    y = np.zeros(x.shape[:2] + (oh, ow))
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            r0, c0 = i * dilations[0], j * dilations[1]
            y += xp[:, :, r0:r0 + (oh - 1) * strides[0] + 1:strides[0], c0:c0 + (ow - 1) * strides[1] + 1:strides[1]]
    return y / (kernel[0] * kernel[1])


ERF = np.vectorize(math.erf)


# ---- the cases: (name, model, inputs, expected outputs) ----

def cases(rng):
    out = []
    # 18: every reduction whose axes moved to input 1, keepdims either way
    x = rng.uniform(0.5, 2.0, (3, 4, 5)).astype(np.float32)
    refs = {
        "ReduceMax": lambda v, a, k: v.max(axis=a, keepdims=k),
        "ReduceMin": lambda v, a, k: v.min(axis=a, keepdims=k),
        "ReduceMean": lambda v, a, k: v.mean(axis=a, keepdims=k),
        "ReduceProd": lambda v, a, k: v.prod(axis=a, keepdims=k),
        "ReduceL1": lambda v, a, k: np.abs(v).sum(axis=a, keepdims=k),
        "ReduceL2": lambda v, a, k: np.sqrt((v * v).sum(axis=a, keepdims=k)),
        "ReduceLogSum": lambda v, a, k: np.log(v.sum(axis=a, keepdims=k)),
        "ReduceLogSumExp": lambda v, a, k: np.log(np.exp(v).sum(axis=a, keepdims=k)),
        "ReduceSumSquare": lambda v, a, k: (v * v).sum(axis=a, keepdims=k),
    }
    for i, (op, ref) in enumerate(refs.items()):
        keep = i % 2
        axes = np.array([0, -1] if i % 3 else [1], np.int64)
        want = ref(x.astype(np.float64), tuple(int(a) for a in axes), bool(keep))
        node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=keep)
        out.append((f"{op.lower()}18", model([node], [vi("x", x.shape)], [vi("y", None)], 18,
                                             [init("axes", axes)]), {"x": x}, {"y": want}))
    # no axes: every axis; noop_with_empty_axes with none: the input itself
    node = helper.make_node("ReduceMean", ["x"], ["y"], keepdims=0)
    out.append(("reducemean18_all", model([node], [vi("x", x.shape)], [vi("y", None)], 18), {"x": x},
                {"y": np.array(x.astype(np.float64).mean())}))
    node = helper.make_node("ReduceMax", ["x"], ["y"], noop_with_empty_axes=1)
    out.append(("reducemax20_noop", model([node], [vi("x", x.shape)], [vi("y", None)], 20), {"x": x},
                {"y": x}))
    # 18: Split's num_outputs, the last part smaller
    xs = rng.standard_normal((2, 7)).astype(np.float32)
    node = helper.make_node("Split", ["x"], ["y0", "y1", "y2"], axis=1, num_outputs=3)
    out.append(("split18_num_outputs", model([node], [vi("x", xs.shape)], [vi(k, None) for k in ("y0", "y1", "y2")], 18),
                {"x": xs}, {"y0": xs[:, 0:3], "y1": xs[:, 3:6], "y2": xs[:, 6:7]}))
    # 18: Pad with axes (reflect on two of four axes, one of them negative)
    xp = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    node = helper.make_node("Pad", ["x", "pads", "", "axes"], ["y"], mode="reflect")
    out.append(("pad18_axes", model([node], [vi("x", xp.shape)], [vi("y", None)], 18,
                                    [init("pads", np.array([1, 2, 2, 0], np.int64)),
                                     init("axes", np.array([1, -1], np.int64))]), {"x": xp},
                {"y": np.pad(xp, [(0, 0), (1, 2), (0, 0), (2, 0)], mode="reflect")}))
    # 19: Pad's wrap mode; 21: constant mode with a value
    node = helper.make_node("Pad", ["x", "pads"], ["y"], mode="wrap")
    out.append(("pad19_wrap", model([node], [vi("x", xp.shape)], [vi("y", None)], 19,
                                    [init("pads", np.array([0, 1, 2, 3, 0, 2, 1, 4], np.int64))]), {"x": xp},
                {"y": np.pad(xp, [(0, 0), (1, 2), (2, 1), (3, 4)], mode="wrap")}))
    node = helper.make_node("Pad", ["x", "pads", "value"], ["y"])
    out.append(("pad21_constant", model([node], [vi("x", xp.shape)], [vi("y", None)], 21,
                                        [init("pads", np.array([0, 0, 1, 0, 0, 0, 0, 2], np.int64)),
                                         init("value", np.float32(1.5))]), {"x": xp},
                {"y": np.pad(xp, [(0, 0), (0, 0), (1, 0), (0, 2)], constant_values=1.5)}))
    # 18: Resize with axes (scales of the last two axes), and keep_aspect_ratio_policy
    xr = rng.standard_normal((1, 2, 4, 6)).astype(np.float32)
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear", axes=[2, 3])
    scales = np.array([2.0, 1.5], np.float32)
    out.append(("resize18_axes", model([node], [vi("x", xr.shape)], [vi("y", None)], 18,
                                       [init("scales", scales)]), {"x": xr},
                {"y": resize_linear(xr, [1, 2, 8, 9], [1, 1, 2.0, 1.5])}))
    for policy, common in (("not_larger", min(6 / 4, 8 / 6)), ("not_smaller", max(6 / 4, 8 / 6))):
        node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear", axes=[2, 3],
                                keep_aspect_ratio_policy=policy)
        sizes = [1, 2, int(common * 4 + 0.5), int(common * 6 + 0.5)]
        out.append((f"resize18_{policy}", model([node], [vi("x", xr.shape)], [vi("y", None)], 18,
                                                [init("sizes", np.array([6, 8], np.int64))]), {"x": xr},
                    {"y": resize_linear(xr, sizes, [1, 1, common, common])}))
    # 19: half_pixel_symmetric, where the output size is exact: half_pixel's values
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear",
                            coordinate_transformation_mode="half_pixel_symmetric")
    out.append(("resize19_half_pixel_symmetric", model([node], [vi("x", xr.shape)], [vi("y", None)], 19,
                                                       [init("scales", np.array([1, 1, 1.5, 0.5], np.float32))]),
                {"x": xr}, {"y": resize_linear(xr, [1, 2, 6, 3], [1, 1, 1.5, 0.5])}))
    # 11+: tf_crop_and_resize (a region of interest reaching outside the input: extrapolated),
    # every mode; 18: its roi over the axes given only
    xc = rng.standard_normal((1, 2, 5, 6)).astype(np.float32)
    roi = np.array([0, 0, -0.2, 0.3, 1, 1, 0.9, 1.3], np.float32)
    for mode, coeffs in (("linear", resize_ref.linear_coeffs), ("nearest", resize_ref.nearest_coeffs),
                         ("cubic", resize_ref.cubic_coeffs)):
        attrs = dict(mode=mode, coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-2.5)
        node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], **attrs)
        sizes = np.array([1, 2, 4, 7], np.int64)
        want = resize_ref.interpolate_nd(xc, coeffs, output_size=sizes, roi=roi,
                                         coordinate_transformation_mode="tf_crop_and_resize",
                                         extrapolation_value=attrs["extrapolation_value"])
        out.append((f"resize13_tf_crop_{mode}", model([node], [vi("x", xc.shape)], [vi("y", None)], 13,
                                                     [init("roi", roi), init("sizes", sizes)]), {"x": xc},
                    {"y": want}))
    # an axis resized to one output, outside the input: extrapolated; keep_aspect_ratio_policy
    # with a region: the kernel's coordinates and the mask both from the unrounded scale
    xo = rng.standard_normal((1, 1, 4, 5)).astype(np.float32)
    node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], mode="linear",
                            coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-9.0)
    roi_one = np.array([0, 0, 1.2, 0, 1, 1, 1.6, 1], np.float32)
    out.append(("resize13_tf_crop_one_output", model([node], [vi("x", xo.shape)], [vi("y", None)], 13,
                                                     [init("roi", roi_one), init("sizes", np.array([1, 1, 1, 3], np.int64))]),
                {"x": xo}, {"y": resize_ref.interpolate_nd(xo, resize_ref.linear_coeffs, output_size=[1, 1, 1, 3],
                                                           roi=roi_one, coordinate_transformation_mode="tf_crop_and_resize",
                                                           extrapolation_value=-9.0)}))
    xk = rng.standard_normal((1, 1, 3, 5)).astype(np.float32)
    node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], mode="linear", axes=[2, 3],
                            coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-9.0,
                            keep_aspect_ratio_policy="not_larger")
    common = min(2 / 3, 4 / 5)
    out.append(("resize18_tf_crop_not_larger", model([node], [vi("x", xk.shape)], [vi("y", None)], 18,
                                                     [init("roi", np.array([0, 0, 1, 1.1], np.float32)),
                                                      init("sizes", np.array([2, 4], np.int64))]),
                {"x": xk}, {"y": resize_ref.interpolate_nd(xk, resize_ref.linear_coeffs,  # output 2 x 3
                                                           scale_factors=[1, 1, common, common],
                                                           roi=np.array([0, 0, 0, 0, 1, 1, 1, 1.1]),
                                                           coordinate_transformation_mode="tf_crop_and_resize",
                                                           extrapolation_value=-9.0)}))
    node = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="linear", axes=[3, 2],
                            coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=7.0)
    want = resize_ref.interpolate_nd(xc, resize_ref.linear_coeffs, scale_factors=[1, 1, 0.8, 1.5],
                                     roi=np.array([0, 0, 0.1, -0.5, 1, 1, 0.6, 0.5]),
                                     coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=7.0)
    out.append(("resize18_tf_crop_axes", model([node], [vi("x", xc.shape)], [vi("y", None)], 18,
                                               [init("roi", np.array([-0.5, 0.1, 0.5, 0.6], np.float32)),
                                                init("scales", np.array([1.5, 0.8], np.float32))]),
                {"x": xc}, {"y": want}))
    # 18: Col2Im (2-D: strides, asymmetric pads)
    image, block, strides, pads, dil = [5, 5], [2, 3], [1, 2], [1, 0, 0, 1], [1, 1]
    oh = (image[0] + pads[0] + pads[2] - dil[0] * (block[0] - 1) - 1) // strides[0] + 1
    ow = (image[1] + pads[1] + pads[3] - dil[1] * (block[1] - 1) - 1) // strides[1] + 1
    col = rng.standard_normal((2, 3 * 6, oh * ow)).astype(np.float32)
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"], strides=strides, pads=pads, dilations=dil)
    out.append(("col2im18", model([node], [vi("x", col.shape)], [vi("y", None)], 18,
                                  [init("image", np.array(image, np.int64)), init("block", np.array(block, np.int64))]),
                {"x": col}, {"y": col2im(col.astype(np.float64), image, block, strides, pads, dil)}))
    # 18: CenterCropPad: a crop on one axis, a pad on another (odd differences)
    xc = rng.standard_normal((2, 7, 4)).astype(np.float32)
    node = helper.make_node("CenterCropPad", ["x", "shape"], ["y"], axes=[1, 2])
    out.append(("centercroppad18", model([node], [vi("x", xc.shape)], [vi("y", None)], 18,
                                         [init("shape", np.array([4, 7], np.int64))]), {"x": xc},
                {"y": center_crop_pad(xc, [4, 7], [1, 2])}))
    # 18 and 21: GroupNormalization (per group, then per channel)
    xg = rng.standard_normal((2, 6, 3, 2)).astype(np.float32) * 2 + 0.5
    for opset, per in ((18, 3), (21, 6)):
        scale = rng.uniform(0.5, 1.5, per).astype(np.float32)
        bias = rng.standard_normal(per).astype(np.float32)
        node = helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"], num_groups=3, epsilon=1e-4)
        out.append((f"groupnorm{opset}", model([node], [vi("x", xg.shape)], [vi("y", None)], opset,
                                               [init("scale", scale), init("bias", bias)]), {"x": xg},
                    {"y": group_norm(xg, 3, scale.astype(np.float64), bias.astype(np.float64), 1e-4, opset >= 21)}))
    # 18: Mish; 20: Gelu both ways
    xm = rng.uniform(-4, 4, (3, 8)).astype(np.float32)
    xd = xm.astype(np.float64)
    out.append(("mish18", model([helper.make_node("Mish", ["x"], ["y"])], [vi("x", xm.shape)], [vi("y", None)], 18),
                {"x": xm}, {"y": xd * np.tanh(np.log1p(np.exp(xd)))}))
    out.append(("gelu20", model([helper.make_node("Gelu", ["x"], ["y"])], [vi("x", xm.shape)], [vi("y", None)], 20),
                {"x": xm}, {"y": 0.5 * xd * (1 + ERF(xd / math.sqrt(2)))}))
    out.append(("gelu20_tanh", model([helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")],
                                     [vi("x", xm.shape)], [vi("y", None)], 20), {"x": xm},
                {"y": 0.5 * xd * (1 + np.tanh(math.sqrt(2 / math.pi) * (xd + 0.044715 * xd ** 3)))}))
    # 18: ScatterElements with reduction mul (16's semantics, version bumped)
    data = rng.standard_normal((3, 4)).astype(np.float32)
    idx = np.array([[1, 0, 2, 1]], np.int64)
    upd = rng.standard_normal((1, 4)).astype(np.float32)
    want = data.astype(np.float64).copy()
    for j in range(4):
        want[idx[0, j], j] *= upd[0, j]
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0, reduction="mul")
    out.append(("scatterelements18_mul", model([node], [vi("x", data.shape)], [vi("y", None)], 18,
                                               [init("i", idx), init("u", upd)]), {"x": data}, {"y": want}))
    # 18: reductions max and min (indices known at load, no element updated twice)
    data = rng.standard_normal((4, 3)).astype(np.float32)
    idx = np.array([[2], [0], [-1]], np.int64)
    upd = rng.standard_normal((3, 3)).astype(np.float32)
    want = data.astype(np.float64).copy()
    for r, i in enumerate(idx[:, 0]):
        want[i] = np.maximum(want[i], upd[r])
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction="max")
    out.append(("scatternd18_max", model([node], [vi("x", data.shape), vi("u", upd.shape)], [vi("y", None)], 18,
                                         [init("i", idx)]), {"x": data, "u": upd}, {"y": want}))
    idx = np.array([[3, 0, 1], [1, 2, 0]], np.int64)
    upd = rng.standard_normal((2, 3)).astype(np.float32)
    want = data.astype(np.float64).copy()
    for r in range(2):
        for j in range(3):
            want[idx[r, j], j] = min(want[idx[r, j], j], upd[r, j])
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0, reduction="min")
    out.append(("scatterelements18_min", model([node], [vi("x", data.shape), vi("u", upd.shape)], [vi("y", None)],
                                               18, [init("i", idx)]), {"x": data, "u": upd}, {"y": want}))
    # 19: AveragePool with dilations of 1, Cast with saturate, Equal
    xa = rng.standard_normal((1, 2, 4, 6)).astype(np.float32)
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], dilations=[1, 1])
    out.append(("averagepool19", model([node], [vi("x", xa.shape)], [vi("y", None)], 19), {"x": xa},
                {"y": xa.astype(np.float64).reshape(1, 2, 2, 2, 3, 2).mean(axis=(3, 5))}))
    # 19: AveragePool's dilations, 2-D without pads and 1-D with pads that count
    xa = rng.standard_normal((1, 2, 7, 8)).astype(np.float32)
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 3], strides=[2, 1], dilations=[3, 2])
    out.append(("averagepool19_dilated", model([node], [vi("x", xa.shape)], [vi("y", None)], 19), {"x": xa},
                {"y": dilated_average(xa, [2, 3], [2, 1], [3, 2], [0, 0, 0, 0])}))
    x1 = rng.standard_normal((2, 3, 9)).astype(np.float32)
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3], dilations=[2], pads=[2, 1],
                            count_include_pad=1)
    out.append(("averagepool19_dilated_1d", model([node], [vi("x", x1.shape)], [vi("y", None)], 19), {"x": x1},
                {"y": dilated_average(x1[:, :, None, :], [1, 3], [1, 1], [1, 2], [0, 2, 0, 1])[:, :, 0, :]}))
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT32, saturate=0)
    xi = np.array([[1.7, -2.2, 300.5]], np.float32)
    out.append(("cast19_saturate", model([node], [vi("x", xi.shape)], [vi("y", None, TensorProto.INT32)], 19),
                {"x": xi}, {"y": np.array([[1, -2, 300]], np.int32)}))
    a = np.array([1, 5, 3, 7], np.int64)
    node = helper.make_node("Equal", ["a", "b"], ["y"])
    out.append(("equal19", model([node], [vi("a", [4], TensorProto.INT64)], [vi("y", None, TensorProto.BOOL)], 19,
                                 [init("b", np.array([1, 4, 3, 8], np.int64))]), {"a": a},
                {"y": np.array([True, False, True, False])}))
    # 20: GridSample's "linear" is 16's "bilinear": the reference is clrun's opset-16 run
    # (checked in main), here the 20 model
    # 21: a chain of the ops whose version only added types, IsInf/IsNaN (20), ConstantOfShape
    xt = rng.standard_normal((2, 3, 4)).astype(np.float32)
    xt[0, 0, 0], xt[1, 2, 3], xt[0, 1, 1] = np.inf, -np.inf, np.nan
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1),
             helper.make_node("ConstantOfShape", ["s"], ["c"], value=numpy_helper.from_array(np.array([2.0], np.float32))),
             helper.make_node("Add", ["x", "c"], ["t0"]),
             helper.make_node("Flatten", ["t0"], ["t1"], axis=1),
             helper.make_node("Unsqueeze", ["t1", "zero"], ["t2"]),
             helper.make_node("Transpose", ["t2"], ["t3"], perm=[0, 2, 1]),
             helper.make_node("Squeeze", ["t3", "zero"], ["t4"]),
             helper.make_node("Reshape", ["t4", "shape"], ["t5"]),
             helper.make_node("Identity", ["t5"], ["y"]),
             helper.make_node("IsInf", ["y"], ["inf"], detect_negative=0),
             helper.make_node("IsNaN", ["y"], ["nan"]),
             helper.make_node("Size", ["x"], ["n"])]
    t5 = (xt.astype(np.float64) + 2.0).reshape(2, 12)[None].transpose(0, 2, 1)[0].reshape(4, 6)
    out.append(("chain21", model(nodes, [vi("x", xt.shape)],
                                 [vi("y", None), vi("inf", None, TensorProto.BOOL), vi("nan", None, TensorProto.BOOL),
                                  vi("n", None, TensorProto.INT64)], 21,
                                 [init("zero", np.array([0], np.int64)), init("shape", np.array([4, 6], np.int64))]),
                {"x": xt}, {"y": t5, "inf": np.isposinf(t5), "nan": np.isnan(t5), "n": np.array(24, np.int64)}))
    # 21: QuantizeLinear per axis to int8 by output_dtype (no zero point), DequantizeLinear back
    # with a zero point per axis
    xq = rng.uniform(-3, 3, (2, 3, 4)).astype(np.float32)
    sq = np.array([0.02, 0.05, 0.1], np.float32)
    q = np.clip(np.rint(xq / sq.reshape(1, 3, 1)), -128, 127).astype(np.int8)
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"], axis=1, output_dtype=TensorProto.INT8, saturate=1)
    out.append(("quantize21", model([node], [vi("x", xq.shape)], [vi("y", None, TensorProto.INT8)], 21,
                                    [init("s", sq)]), {"x": xq}, {"y": q}))
    zp = np.array([3, -2, 0], np.int8)
    node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=1)
    out.append(("dequantize21", model([node], [vi("x", q.shape, TensorProto.INT8)], [vi("y", None)], 21,
                                      [init("s", sq), init("z", zp)]), {"x": q},
                {"y": ((q.astype(np.float32) - zp.astype(np.float32).reshape(1, 3, 1)) * sq.reshape(1, 3, 1))}))
    return out


def refusals():
    """(name, model, inputs, the words the refusal must hold)."""
    x4 = np.ones((1, 2, 4, 4), np.float32)
    out = []
    node = helper.make_node("ReduceMean", ["x"], ["y"], axes=[1])
    out.append(("reducemean18_axes_attribute", model([node], [vi("x", x4.shape)], [vi("y", None)], 18), {"x": x4},
                "(ReduceMean, opset 18): attribute 'axes' is not supported"))
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear", antialias=1)
    out.append(("resize18_antialias", model([node], [vi("x", x4.shape)], [vi("y", None)], 18,
                                            [init("scales", np.array([1, 1, 0.5, 0.5], np.float32))]), {"x": x4},
                "(Resize, opset 18): antialias=1 is not supported"))
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear",
                            coordinate_transformation_mode="half_pixel_symmetric")
    out.append(("resize19_symmetric_fraction", model([node], [vi("x", x4.shape)], [vi("y", None)], 19,
                                                     [init("scales", np.array([1, 1, 1.3, 1], np.float32))]),
                {"x": x4}, "half_pixel_symmetric with scale 1.3"))
    node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], mode="linear",
                            coordinate_transformation_mode="tf_crop_and_resize")
    out.append(("resize18_tf_crop_short_roi", model([node], [vi("x", x4.shape)], [vi("y", None)], 18,
                                                    [init("roi", np.array([0, 0, 1], np.float32)),
                                                     init("sizes", np.array([1, 2, 3, 3], np.int64))]),
                {"x": x4}, "roi has 3 entries for 4 axes (a start and an end each)"))
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction="max")
    out.append(("scatternd18_max_twice", model([node], [vi("x", [4])], [vi("y", None)], 18,
                                               [init("i", np.array([[1], [1]], np.int64)),
                                                init("u", np.array([5, 6], np.float32))]),
                {"x": np.zeros(4, np.float32)},
                "(ScatterND, opset 18): reduction 'max' with two updates of one element is not supported"))
    out.append(("scatternd18_min_fed", model([node], [vi("x", [4]), vi("i", [1, 1], TensorProto.INT64)],
                                             [vi("y", None)], 18, [init("u", np.array([5], np.float32))]),
                {"x": np.zeros(4, np.float32), "i": np.array([[1]], np.int64)},
                "reduction max or min with indices known only at run time is not supported (input 1 'i'"))
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 2], pads=[1, 1, 1, 1])
    out.append(("averagepool19_dilations_pads", model([node], [vi("x", x4.shape)], [vi("y", None)], 19), {"x": x4},
                "(AveragePool, opset 19): dilations other than 1 for AveragePool are supported in 1-D and 2-D"))
    node = helper.make_node("Cast", ["x"], ["y"], to=17)
    out.append(("cast19_float8", model([node], [vi("x", x4.shape)], [vi("y", None)], 19), {"x": x4},
                "(Cast, opset 19): cast to float8e4m3fn is not supported"))
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"], axis=1, block_size=2)
    out.append(("quantize21_blocked", model([node], [vi("x", x4.shape)], [vi("y", None)], 21,
                                            [init("s", np.ones((1, 1, 4, 4), np.float32))]), {"x": x4},
                "(QuantizeLinear, opset 21): block_size 2 (blocked quantization) is not supported"))
    node = helper.make_node("GridSample", ["x", "g"], ["y"], mode="bilinear")
    out.append(("gridsample20_old_name", model([node], [vi("x", x4.shape)], [vi("y", None)], 20,
                                               [init("g", np.zeros((1, 2, 2, 2), np.float32))]), {"x": x4},
                "mode 'bilinear' is not linear, nearest or cubic (opset 20)"))
    xf = np.array([1, 2], np.float32)
    node = helper.make_node("BitwiseAnd", ["x", "x"], ["y"])
    out.append(("bitwiseand18_float", model([node], [vi("x", [2])], [vi("y", None)], 18),
                {"x": xf}, "(BitwiseAnd, opset 18): input 0 'x' is float: BitwiseAnd takes integers"))
    node = helper.make_node("DeformConv", ["x", "w", "o"], ["y"])
    out.append(("deformconv19", model([node], [vi("x", x4.shape)], [vi("y", None)], 19,
                                      [init("w", np.ones((1, 2, 1, 1), np.float32)),
                                       init("o", np.zeros((1, 2, 4, 4), np.float32))]), {"x": x4},
                "(DeformConv, opset 19): operator DeformConv is not supported"))
    node = helper.make_node("Relu", ["x"], ["y"])
    out.append(("relu22", model([node], [vi("x", x4.shape)], [vi("y", None)], 22), {"x": x4},
                "opset 22 of the default domain is newer than clrun knows (up to 21)"))
    return out


def main():
    clrun, work = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(20261204)
    ok = True
    for name, m, inputs, expected in cases(rng):
        got, err = run(clrun, os.path.join(work, name), m, inputs, list(expected))
        if got is None:
            print(f"FAIL {name}: {err}")
            ok = False
            continue
        bad = []
        for key, want in expected.items():
            fine, what = close(got[key], np.asarray(want), TOLERANCE)
            if not fine:
                bad.append(f"{key}: {what}")
        if bad:
            print(f"FAIL {name}: {'; '.join(bad)}")
            ok = False
        else:
            print(f"PASS {name}")
    # GridSample 20's "linear"/"cubic" against 16's "bilinear"/"bicubic": the same bits
    x = rng.standard_normal((1, 2, 5, 6)).astype(np.float32)
    grid = rng.uniform(-1.1, 1.1, (1, 3, 4, 2)).astype(np.float32)
    for new, old in (("linear", "bilinear"), ("cubic", "bicubic"), ("nearest", "nearest")):
        runs = []
        for opset, mode in ((20, new), (16, old)):
            node = helper.make_node("GridSample", ["x", "g"], ["y"], mode=mode, align_corners=1)
            m = model([node], [vi("x", x.shape), vi("g", grid.shape)], [vi("y", None)], opset)
            got, err = run(clrun, os.path.join(work, f"gridsample{opset}_{mode}"), m, {"x": x, "g": grid}, ["y"])
            runs.append(got["y"] if got else err)
        if isinstance(runs[0], str) or isinstance(runs[1], str) or runs[0].tobytes() != runs[1].tobytes():
            print(f"FAIL gridsample20_{new}: {runs[0] if isinstance(runs[0], str) else runs[1]}")
            ok = False
        else:
            print(f"PASS gridsample20_{new}: the bits of opset 16's {old}")
    ok = refusals_hold(clrun, work, refusals()) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
