#!/usr/bin/python3
"""Ops over an empty operand (a dimension 0) whose result is not empty, through clrun (`clrun run
MODEL.onnx --input ... --output-dir`), against a numpy reference of the ONNX spec: a padded Conv
over an empty image and a Conv over an empty channel axis (each output sums nothing: the bias,
fed at run time, or zeros; SAME padding of an empty image leaves no row), a ConvTranspose over
an empty image (its kernel's reach: the bias), a Gemm with K = 0 (beta * C, C fed at run time),
Pad of an empty tensor (its value) and Pad cropping an axis to nothing, the reductions of
nothing (L1, L2, SumSquare 0, LogSum and LogSumExp -inf, Prod 1, Max -inf), a Split-18 whose
num_outputs leaves the last part empty, LSTM over no step (the initial states), GRU over no
batch entry, RNN over an input size of 0 and a Loop of no iteration with a scan output (empty,
of the body's declared entry); then what the spec leaves undefined (edge padding of an empty
axis, a mean of nothing) and operands that do not fit refused by name. In every allocator mode
and with fusion off (CLRUN_FUSION=0): bit-identical results.
Usage: onnx_empty_ops.py CLRUN WORKDIR"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper
from onnx_common import close, init, model, refusals_hold, run, some_modes, vi

I64 = TensorProto.INT64
F32 = TensorProto.FLOAT
f32 = np.float32
WT = (np.arange(24, dtype=f32).reshape(2, 3, 2, 2) - 12) / 5  # ConvTranspose's [C, M, 2, 2]


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
        axes = list(range(1, x.ndim))
        y[(slice(None), slice(None)) + pos] = np.tensordot(patch, w, axes=(axes, axes))
    if b is not None:
        y += b.reshape((1, -1) + (1,) * spatial)
    return y


def conv_transpose_ref(x, w, b):
    """ONNX ConvTranspose (2-D, strides 1, no padding, one group) by its definition: each input
    element scatters x times its kernel into the output, then b is added."""
    out = (x.shape[2] + w.shape[2] - 1, x.shape[3] + w.shape[3] - 1)
    y = np.zeros((x.shape[0], w.shape[1]) + out, f32)
    for n, c, i, j in np.ndindex(*x.shape):
        y[n, :, i:i + w.shape[2], j:j + w.shape[3]] += x[n, c, i, j] * w[c]
    return y + b.reshape(1, -1, 1, 1)


def build():
    nodes = [
        helper.make_node("Conv", ["xh", "w", "b"], ["ch"], pads=[2, 0, 2, 0]),
        helper.make_node("Mul", ["ch", "g"], ["z_conv_h"]),
        helper.make_node("Conv", ["xc", "wc", "b"], ["z_conv_c"]),
        helper.make_node("Conv", ["x1", "w1"], ["z_conv_1d"], pads=[1, 1]),
        helper.make_node("Conv", ["xs", "ws"], ["z_conv_same"], auto_pad="SAME_UPPER", strides=[2, 1]),
        helper.make_node("ConvTranspose", ["xt", "wt", "b"], ["z_conv_t"]),
        helper.make_node("Gemm", ["a", "bk", "c"], ["z_gemm"], alpha=2.0, beta=0.5),
        helper.make_node("Gemm", ["at", "bk"], ["z_gemm_t"], transA=1),
        helper.make_node("Pad", ["xp", "pads", "value"], ["z_pad"]),
        helper.make_node("Pad", ["xq", "crop"], ["z_crop"]),
        helper.make_node("Split", ["s"], ["z_s0", "z_s1", "z_s2"], axis=0, num_outputs=3),
    ]
    reductions = ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp", "ReduceSum",
                  "ReduceProd", "ReduceMax"]
    for op in reductions:
        nodes.append(helper.make_node(op, ["xr", "axes"], ["z_" + op], keepdims=0))
    inputs = [vi("xh", [1, 2, 0, 3]), vi("w", [3, 2, 3, 1]), vi("b", [3]), vi("g", [1, 3, 2, 3]),
              vi("xc", [1, 0, 4, 4]), vi("x1", [2, 1, 0]), vi("xs", [1, 1, 0, 2]), vi("xt", [1, 2, 0, 2]),
              vi("a", [2, 0]), vi("c", [3]), vi("at", [0, 2]), vi("xq", [3, 2]),
              vi("xp", [0, 3]), vi("s", [2, 3]), vi("xr", [3, 0])]
    outputs = [vi("z_conv_h", [1, 3, 2, 3]), vi("z_conv_c", [1, 3, 2, 2]), vi("z_conv_1d", [2, 2, 1]),
               vi("z_conv_same", [1, 2, 0, 2]), vi("z_conv_t", [1, 3, 1, 3]),
               vi("z_gemm", [2, 3]), vi("z_gemm_t", [2, 3]), vi("z_pad", [3, 3]), vi("z_crop", [0, 3]),
               vi("z_s0", [1, 3]),
               vi("z_s1", [1, 3]), vi("z_s2", [0, 3])] + [vi("z_" + op, [3]) for op in reductions]
    inits = [init("wc", np.zeros((3, 0, 3, 3), f32)), init("w1", np.ones((2, 1, 2), f32)),
             init("ws", np.ones((2, 1, 3, 3), f32)), init("wt", WT),
             init("bk", np.zeros((0, 3), f32)), init("pads", np.array([1, 0, 2, 0], np.int64)),
             init("crop", np.array([-1, 1, -2, 0], np.int64)),
             init("value", np.array(1.5, f32)), init("axes", np.array([1], np.int64))]
    return model(nodes, inputs, outputs, 18, inits)


H, B = 3, 2


def build_recurrent():
    """LSTM over no step (Y empty, Y_h and Y_c the initial states), GRU over no batch entry (all
    empty), RNN over an input size of 0 (the recurrence from its biases alone), a Loop of no
    iteration (the carried value as given, the scan output empty of its declared entry)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["v_in", "one"], ["v_out"]), helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Mul", ["v_out", "one"], ["entry"])],
        "body", [vi("i", [], I64), vi("cond_in", [], TensorProto.BOOL), vi("v_in", [2])],
        [vi("cond_out", [], TensorProto.BOOL), vi("v_out", [2]), vi("entry", [2])], [init("one", np.ones(2, f32))])
    nodes = [
        helper.make_node("LSTM", ["lx", "lw", "lr", "", "", "h0", "c0"], ["z_lstm_y", "z_lstm_h", "z_lstm_c"],
                         hidden_size=H),
        helper.make_node("GRU", ["gx", "gw", "gr"], ["z_gru_y", "z_gru_h"], hidden_size=H),
        helper.make_node("RNN", ["rx", "rw", "rr", "rb"], ["z_rnn_y", "z_rnn_h"], hidden_size=H),
        helper.make_node("Loop", ["trips", "go", "v0"], ["z_loop_v", "z_loop_scan"], body=body),
    ]
    inputs = [vi("lx", [0, B, 2]), vi("lw", [1, 4 * H, 2]), vi("lr", [1, 4 * H, H]), vi("h0", [1, B, H]),
              vi("c0", [1, B, H]), vi("gx", [4, 0, 2]), vi("gw", [1, 3 * H, 2]), vi("gr", [1, 3 * H, H]),
              vi("rx", [3, B, 0]), vi("rw", [1, H, 0]), vi("rr", [1, H, H]), vi("rb", [1, 2 * H]), vi("v0", [2])]
    outputs = [vi("z_lstm_y", [0, 1, B, H]), vi("z_lstm_h", [1, B, H]), vi("z_lstm_c", [1, B, H]),
               vi("z_gru_y", [4, 1, 0, H]), vi("z_gru_h", [1, 0, H]), vi("z_rnn_y", [3, 1, B, H]),
               vi("z_rnn_h", [1, B, H]), vi("z_loop_v", [2]), vi("z_loop_scan", [0, 2])]
    inits = [init("trips", np.array(0, np.int64)), init("go", np.array(True))]
    return model(nodes, inputs, outputs, 14, inits)


def reference_recurrent(f):
    """The spec's equations step by step: no step leaves the initial state; RNN's
    H_t = tanh(X_t W^T + H_{t-1} R^T + Wb + Rb) with X_t W^T a sum of nothing."""
    h, ys = np.zeros((B, H), f32), []
    for x in f["rx"]:
        h = np.tanh(x @ f["rw"][0].T + h @ f["rr"][0].T + f["rb"][0, :H] + f["rb"][0, H:])
        ys.append(h)
    return {"z_lstm_y": np.zeros((0, 1, B, H), f32), "z_lstm_h": f["h0"], "z_lstm_c": f["c0"],
            "z_gru_y": np.zeros((4, 1, 0, H), f32), "z_gru_h": np.zeros((1, 0, H), f32),
            "z_rnn_y": np.stack(ys)[:, None], "z_rnn_h": h[None], "z_loop_v": f["v0"],
            "z_loop_scan": np.zeros((0, 2), f32)}


def reference(f):
    with np.errstate(divide="ignore"):
        xr = f["xr"]
        parts = np.split(f["s"], [1, 2], axis=0)
        return {
            "z_conv_h": conv_ref(f["xh"], f["w"], f["b"], [2, 0, 2, 0]) * f["g"],
            "z_conv_c": conv_ref(f["xc"], np.zeros((3, 0, 3, 3), f32), f["b"], [0, 0, 0, 0]),
            "z_conv_1d": conv_ref(f["x1"], np.ones((2, 1, 2), f32), None, [1, 1]),
            "z_conv_same": np.zeros((1, 2, 0, 2), f32),  # SAME: ceil(0 / 2) rows
            "z_conv_t": conv_transpose_ref(f["xt"], WT, f["b"]),
            "z_gemm": f32(2) * (f["a"] @ np.zeros((0, 3), f32)) + f32(0.5) * f["c"],
            "z_gemm_t": f["at"].T @ np.zeros((0, 3), f32),
            "z_pad": np.pad(f["xp"], [(1, 2), (0, 0)], constant_values=1.5),
            "z_crop": np.pad(f["xq"][1:1], [(0, 0), (1, 0)]),  # pads -1 and -2 crop all 3 rows
            "z_s0": parts[0], "z_s1": parts[1], "z_s2": parts[2],
            "z_ReduceL1": np.abs(xr).sum(axis=1), "z_ReduceL2": np.sqrt((xr * xr).sum(axis=1)),
            "z_ReduceSumSquare": (xr * xr).sum(axis=1), "z_ReduceLogSum": np.log(xr.sum(axis=1)),
            "z_ReduceLogSumExp": np.log(np.exp(xr).sum(axis=1)), "z_ReduceSum": xr.sum(axis=1),
            "z_ReduceProd": xr.prod(axis=1), "z_ReduceMax": np.full(3, -np.inf, f32),
        }


def refusals(work):
    """What the spec leaves without a value stays refused, naming the node and the reason (and a
    Loop of no iteration whose body does not declare its scan output's shape); so do operands
    that do not fit."""
    edge = model(helper.make_node("Pad", ["x", "pads"], ["y"], mode="edge", name="edge_pad"), [vi("x", [0, 3])],
                 [vi("y", [2, 3])], 13, [init("pads", np.array([1, 0, 1, 0], np.int64))])
    mean = model(helper.make_node("ReduceMean", ["x"], ["y"], axes=[1], keepdims=0, name="mean"),
                 [vi("x", [3, 0])], [vi("y", [3])], 13)
    bad = model(helper.make_node("Conv", ["x", "w"], ["y"], pads=[2, 0, 2, 0], name="bad_conv"),
                [vi("x", [1, 2, 0, 3])], [vi("y", [1, 3, 2, 3])], 13, [init("w", np.ones((3, 1, 3, 1), f32))])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Identity", ["v_in"], ["entry"])],
        "body", [vi("i", [], I64), vi("cond_in", [], TensorProto.BOOL), vi("v_in", [2])],
        [vi("cond_out", [], TensorProto.BOOL), vi("v_in", [2]), helper.make_tensor_value_info("entry", F32, None)])
    loop = model(helper.make_node("Loop", ["trips", "", "v0"], ["v", "y"], body=body, name="no_trips"),
                 [vi("v0", [2])], [vi("v", [2]), vi("y", [0, 2])], 13, [init("trips", np.array(0, np.int64))])
    return [("loop_undeclared", loop, {"v0": np.ones(2, f32)}, "'no_trips' (Loop, opset 13): a Loop that runs no "
             "iteration has its scan output 'entry' empty"),
            ("conv_channels", bad, {"x": np.zeros((1, 2, 0, 3), f32)}, "'bad_conv' (Conv, opset 13): Conv of X "
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
             "xc": np.zeros((1, 0, 4, 4), f32), "x1": np.zeros((2, 1, 0), f32),
             "xs": np.zeros((1, 1, 0, 2), f32), "xt": np.zeros((1, 2, 0, 2), f32),
             "xq": rng.standard_normal((3, 2)).astype(f32), "a": np.zeros((2, 0), f32),
             "c": np.array([0.5, -1.0, 7.25], f32), "at": np.zeros((0, 2), f32), "xp": np.zeros((0, 3), f32),
             "s": rng.standard_normal((2, 3)).astype(f32), "xr": np.zeros((3, 0), f32)}
    recurrent = {"lx": np.zeros((0, B, 2), f32), "lw": rng.standard_normal((1, 4 * H, 2)).astype(f32),
                 "lr": rng.standard_normal((1, 4 * H, H)).astype(f32), "h0": rng.standard_normal((1, B, H)).astype(f32),
                 "c0": rng.standard_normal((1, B, H)).astype(f32), "gx": np.zeros((4, 0, 2), f32),
                 "gw": rng.standard_normal((1, 3 * H, 2)).astype(f32),
                 "gr": rng.standard_normal((1, 3 * H, H)).astype(f32), "rx": np.zeros((3, B, 0), f32),
                 "rw": np.zeros((1, H, 0), f32), "rr": rng.standard_normal((1, H, H)).astype(f32),
                 "rb": rng.standard_normal((1, 2 * H)).astype(f32), "v0": np.array([3.5, -4.0], f32)}
    failures = 0
    modes = some_modes([("tlsf", False), ("buddy", False), ("planned", False), ("naive", False), ("tlsf", True)])
    for label, m, inputs, want in [("ops", build(), feeds, reference(feeds)),
                                   ("recurrent", build_recurrent(), recurrent, reference_recurrent(recurrent))]:
        first = None
        for allocator, no_fusion in modes:
            where = "%s, %s%s" % (label, allocator, ", fusion off" if no_fusion else "")
            if no_fusion:
                os.environ["CLRUN_FUSION"] = "0"
            else:
                os.environ.pop("CLRUN_FUSION", None)
            folder = os.path.join(work, label, allocator + ("-nofusion" if no_fusion else ""))
            got, text = run(clrun, folder, m, inputs, list(want), ["--allocator", allocator])
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
            print("ok   %s: %s" % (where, ", ".join("%s %s" % (k[2:], got[k].shape) for k in list(want)[:5])))
    os.environ.pop("CLRUN_FUSION", None)
    if not refusals_hold(clrun, os.path.join(work, "refused"), refusals(work)):
        failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
