#!/usr/bin/python3
"""Empty tensors (a dimension 0) at run time through clrun (`clrun run MODEL.onnx --input ...
--output-dir`): a model written here with the onnx package's helpers whose graph input x is
empty ([3, 0, 5], fed as an empty .npy), whose intermediates are empty (relu(x), its transpose)
and whose outputs are too, against numpy: Concat drops the empty operand, ReduceSum over the empty
axis gives 0, ReduceMax -inf (ONNX's identity), an elementwise op of an empty operand is empty,
and an empty output is written as an empty .npy of its shape. In every allocator mode and with
fusion off (CLRUN_FUSION=0): the same results.
Usage: onnx_empty.py CLRUN WORKDIR"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper
from onnx_common import close, init, model, run, some_modes, vi

I64 = TensorProto.INT64


def build():
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Concat", ["r", "h"], ["z1"], axis=1),
        helper.make_node("ReduceSum", ["r", "axes"], ["z2"], keepdims=0),
        helper.make_node("Mul", ["r", "two"], ["z3"]),
        helper.make_node("ReduceMax", ["r"], ["z4"], axes=[1], keepdims=0),
        helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0, 2]),
        helper.make_node("Sigmoid", ["t"], ["z5"]),
        helper.make_node("Concat", ["t", "t"], ["z6"], axis=0),
    ]
    inputs = [vi("x", [3, 0, 5]), vi("h", [3, 2, 5])]
    outputs = [vi("z1", [3, 2, 5]), vi("z2", [3, 5]), vi("z3", [3, 0, 5]), vi("z4", [3, 5]),
               vi("z5", [0, 3, 5]), vi("z6", [0, 3, 5])]
    inits = [init("axes", np.array([1], np.int64)), init("two", np.array([2], np.float32))]
    return model(nodes, inputs, outputs, 13, inits)


def reference(x, h):
    r = np.maximum(x, 0)
    t = r.transpose(1, 0, 2)
    return {"z1": np.concatenate([r, h], axis=1), "z2": r.sum(axis=1), "z3": r * np.float32(2),
            "z4": np.full((3, 5), -np.inf, np.float32), "z5": 1 / (1 + np.exp(-t)),
            "z6": np.concatenate([t, t], axis=0)}


def main():
    clrun, work = sys.argv[1], sys.argv[2]
    x = np.zeros((3, 0, 5), np.float32)
    h = np.arange(30, dtype=np.float32).reshape(3, 2, 5) / 7 - 2
    want = reference(x, h)
    failures = 0
    modes = some_modes([("tlsf", False), ("buddy", False), ("slab", False), ("bump", False), ("naive", False),
                        ("planned", False), ("tlsf", True), ("planned", True)])
    for allocator, no_fusion in modes:
        where = "%s%s" % (allocator, ", fusion off" if no_fusion else "")
        if no_fusion:
            os.environ["CLRUN_FUSION"] = "0"
        else:
            os.environ.pop("CLRUN_FUSION", None)
        got, text = run(clrun, os.path.join(work, allocator + ("-nofusion" if no_fusion else "")), build(),
                        {"x": x, "h": h}, list(want), ["--allocator", allocator])
        if got is None:
            print("FAIL %s: clrun run failed: %s" % (where, text))
            failures += 1
            continue
        for name, value in want.items():
            ok, what = close(got[name], value.astype(np.float32), 1e-6)
            if not ok or got[name].shape != value.shape:
                print("FAIL %s: %s: %s" % (where, name, what or "shape %s" % (got[name].shape,)))
                failures += 1
        print("ok   %s: z3 %s, z5 %s, z1 = h" % (where, got["z3"].shape, got["z5"].shape))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
