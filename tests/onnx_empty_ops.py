#!/usr/bin/python3
"""Ops over an empty operand (a dimension 0) whose result is not empty, through clrun (`clrun run
MODEL.onnx --input ... --output-dir`), against a numpy reference of the ONNX spec: a padded Conv
over an empty image and a Conv over an empty channel axis (each output sums nothing: the bias,
fed at run time, or zeros), a Gemm with K = 0 (beta * C, C fed at run time), Pad of an empty
tensor (its value), the reductions of nothing (L1, L2, SumSquare 0, LogSum and LogSumExp -inf,
Prod 1, Max -inf) and a Split-18 whose num_outputs leaves the last part empty; then what the spec
leaves undefined (edge padding of an empty axis, a mean of nothing) and operands that do not fit
refused by name. In every
allocator mode and with fusion off (CLRUN_FUSION=0): bit-identical results.
Usage: onnx_empty_ops.py CLRUN WORKDIR"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper
from onnx_common import close, init, model, refusals_hold, run, some_modes, vi

I64 = TensorProto.INT64
f32 = np.float32


def conv_ref(x, w, b, pads):
    """ONNX Conv (strides and dilations 1, one group) by its definition: zeros around x, each
    output the sum over channels and window of x times w, plus b."""
    spatial = x.ndim - 2
    k = len(pads) // 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + k]) for i in range(spatial)])
    out_sp = [xp.shape[2 + i] - w.shape[2 + i] + 1 for i in range(spatial)]
    y = np.zeros((x.shape[0], w.shape[0]) + tuple(out_sp), f32)
    for pos in np.ndindex(*out_sp):
        window = tuple(slice(p, p + w.shape[2 + i]) for i, p in enumerate(pos))
        patch = xp[(slice(None), slice(None)) + window]
        y[(slice(None), slice(None)) + pos] = np.tensordot(patch, w, axes=(list(range(1, x.ndim)), list(range(1, x.ndim))))
    if b is not None:
        y += b.reshape((1, -1) + (1,) * spatial)
    return y


def build():
    nodes = [
        helper.make_node("Conv", ["xh", "w", "b"], ["ch"], pads=[2, 0, 2, 0]),
        helper.make_node("Mul", ["ch", "g"], ["z_conv_h"]),
        helper.make_node("Conv", ["xc", "wc", "b"], ["z_conv_c"]),
        helper.make_node("Conv", ["x1", "w1"], ["z_conv_1d"], pads=[1, 1]),
        helper.make_node("Gemm", ["a", "bk", "c"], ["z_gemm"], alpha=2.0, beta=0.5),
        helper.make_node("Gemm", ["at", "bk"], ["z_gemm_t"], transA=1),
        helper.make_node("Pad", ["xp", "pads", "value"], ["z_pad"]),
        helper.make_node("Split", ["s"], ["z_s0", "z_s1", "z_s2"], axis=0, num_outputs=3),
    ]
    reductions = ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp", "ReduceSum",
                  "ReduceProd", "ReduceMax"]
    for op in reductions:
        nodes.append(helper.make_node(op, ["xr", "axes"], ["z_" + op], keepdims=0))
    inputs = [vi("xh", [1, 2, 0, 3]), vi("w", [3, 2, 3, 1]), vi("b", [3]), vi("g", [1, 3, 2, 3]),
              vi("xc", [1, 0, 4, 4]), vi("x1", [2, 1, 0]), vi("a", [2, 0]), vi("c", [3]), vi("at", [0, 2]),
              vi("xp", [0, 3]), vi("s", [2, 3]), vi("xr", [3, 0])]
    outputs = [vi("z_conv_h", [1, 3, 2, 3]), vi("z_conv_c", [1, 3, 2, 2]), vi("z_conv_1d", [2, 2, 1]),
               vi("z_gemm", [2, 3]), vi("z_gemm_t", [2, 3]), vi("z_pad", [3, 3]), vi("z_s0", [1, 3]),
               vi("z_s1", [1, 3]), vi("z_s2", [0, 3])] + [vi("z_" + op, [3]) for op in reductions]
    inits = [init("wc", np.zeros((3, 0, 3, 3), f32)), init("w1", np.ones((2, 1, 2), f32)),
             init("bk", np.zeros((0, 3), f32)), init("pads", np.array([1, 0, 2, 0], np.int64)),
             init("value", np.array(1.5, f32)), init("axes", np.array([1], np.int64))]
    return model(nodes, inputs, outputs, 18, inits)


def reference(f):
    with np.errstate(divide="ignore"):
        xr = f["xr"]
        parts = np.split(f["s"], [1, 2], axis=0)
        return {
            "z_conv_h": conv_ref(f["xh"], f["w"], f["b"], [2, 0, 2, 0]) * f["g"],
            "z_conv_c": conv_ref(f["xc"], np.zeros((3, 0, 3, 3), f32), f["b"], [0, 0, 0, 0]),
            "z_conv_1d": conv_ref(f["x1"], np.ones((2, 1, 2), f32), None, [1, 1]),
            "z_gemm": f32(2) * (f["a"] @ np.zeros((0, 3), f32)) + f32(0.5) * f["c"],
            "z_gemm_t": f["at"].T @ np.zeros((0, 3), f32),
            "z_pad": np.pad(f["xp"], [(1, 2), (0, 0)], constant_values=1.5),
            "z_s0": parts[0], "z_s1": parts[1], "z_s2": parts[2],
            "z_ReduceL1": np.abs(xr).sum(axis=1), "z_ReduceL2": np.sqrt((xr * xr).sum(axis=1)),
            "z_ReduceSumSquare": (xr * xr).sum(axis=1), "z_ReduceLogSum": np.log(xr.sum(axis=1)),
            "z_ReduceLogSumExp": np.log(np.exp(xr).sum(axis=1)), "z_ReduceSum": xr.sum(axis=1),
            "z_ReduceProd": xr.prod(axis=1), "z_ReduceMax": np.full(3, -np.inf, f32),
        }


def refusals(work):
    """What the spec leaves without a value stays refused, naming the node and the reason; so do
    operands that do not fit."""
    edge = model(helper.make_node("Pad", ["x", "pads"], ["y"], mode="edge", name="edge_pad"), [vi("x", [0, 3])],
                 [vi("y", [2, 3])], 13, [init("pads", np.array([1, 0, 1, 0], np.int64))])
    mean = model(helper.make_node("ReduceMean", ["x"], ["y"], axes=[1], keepdims=0, name="mean"),
                 [vi("x", [3, 0])], [vi("y", [3])], 13)
    bad = model(helper.make_node("Conv", ["x", "w"], ["y"], pads=[2, 0, 2, 0], name="bad_conv"),
                [vi("x", [1, 2, 0, 3])], [vi("y", [1, 3, 2, 3])], 13, [init("w", np.ones((3, 1, 3, 1), f32))])
    return [("conv_channels", bad, {"x": np.zeros((1, 2, 0, 3), f32)}, "'bad_conv' (Conv, opset 13): Conv of X "
             "[1, 2, 0, 3] and W [3, 1, 3, 1] in 1 groups: the channels"),
            ("pad_edge", edge, {"x": np.zeros((0, 3), f32)}, "'edge_pad' (Pad, opset 13): edge pads of 1 and 1 "
             "on the empty axis 0"),
            ("reduce_mean", mean, {"x": np.zeros((3, 0), f32)}, "'mean' (ReduceMean, opset 13): ReduceMean over "
             "an empty axis of float has no value")]


def main():
    clrun, work = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(25)
    feeds = {"xh": np.zeros((1, 2, 0, 3), f32), "w": rng.standard_normal((3, 2, 3, 1)).astype(f32),
             "b": np.array([1.25, -2.5, 3.0], f32), "g": rng.standard_normal((1, 3, 2, 3)).astype(f32),
             "xc": np.zeros((1, 0, 4, 4), f32), "x1": np.zeros((2, 1, 0), f32), "a": np.zeros((2, 0), f32),
             "c": np.array([0.5, -1.0, 7.25], f32), "at": np.zeros((0, 2), f32), "xp": np.zeros((0, 3), f32),
             "s": rng.standard_normal((2, 3)).astype(f32), "xr": np.zeros((3, 0), f32)}
    want = reference(feeds)
    failures, first = 0, None
    modes = some_modes([("tlsf", False), ("buddy", False), ("planned", False), ("naive", False), ("tlsf", True)])
    for allocator, no_fusion in modes:
        where = "%s%s" % (allocator, ", fusion off" if no_fusion else "")
        if no_fusion:
            os.environ["CLRUN_FUSION"] = "0"
        else:
            os.environ.pop("CLRUN_FUSION", None)
        got, text = run(clrun, os.path.join(work, allocator + ("-nofusion" if no_fusion else "")), build(), feeds,
                        list(want), ["--allocator", allocator])
        if got is None:
            print("FAIL %s: clrun run failed: %s" % (where, text))
            failures += 1
            continue
        for name, value in want.items():
            ok, what = close(got[name], value.astype(f32), 1e-6)
            if not ok:
                print("FAIL %s: %s: %s" % (where, name, what))
                failures += 1
            if first is not None and not np.array_equal(got[name], first[name], equal_nan=True):
                print("FAIL %s: %s differs from the %s run" % (where, name, modes[0][0]))
                failures += 1
        first = first or got
        print("ok   %s: conv over an empty image %s, gemm K=0 %s, pad %s, split %s" %
              (where, got["z_conv_h"].shape, got["z_gemm"].shape, got["z_pad"].shape, got["z_s2"].shape))
    os.environ.pop("CLRUN_FUSION", None)
    if not refusals_hold(clrun, os.path.join(work, "refused"), refusals(work)):
        failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
