#!/usr/bin/python3
"""If with a condition known only at run time through clrun (`clrun run MODEL.onnx --input ...
--output-dir`): a model built here with the onnx package, as voice-activity detectors are made,
whose If branches on a sample-rate input fed at run time:

  sr == 16000   then_branch: relu(2 x) plus a nested If on sum(x) > 0 (x + 1, else x - 1), every
                branch reading x from the outer scope
  otherwise     else_branch: x plus column (sr / 1000 - 8) of x, a Gather whose index is out of
                range when sr is 16000 (the branch is skipped then: the run must not fail)

Run for sr 16000 and 8000, and x of either sign (both sides of the nested If), against a numpy
reference: within 1e-6, and bit-identical under every allocator and with fusion off. The same
model with sr fixed at load (`--const sr=...`) gives the same bits. Also the Scan and Loop
models unrolled at load, against numpy. Usage: onnx_control.py CLRUN WORKDIR"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ALLOCATORS = ["tlsf", "buddy", "slab", "bump", "naive", "planned"]
TOLERANCE = 1e-6


def const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


def if_model():
    f = TensorProto.FLOAT
    # nested If, inside the then_branch: reads x from two scopes up
    inner_then = helper.make_graph(
        [const("one", np.float32(1)), helper.make_node("Add", ["x", "one"], ["it_out"])],
        "inner_then", [], [helper.make_tensor_value_info("it_out", f, [4, 8])])
    inner_else = helper.make_graph(
        [const("one_e", np.float32(1)), helper.make_node("Sub", ["x", "one_e"], ["ie_out"])],
        "inner_else", [], [helper.make_tensor_value_info("ie_out", f, [4, 8])])
    then_branch = helper.make_graph(
        [const("two", np.float32(2)), helper.make_node("Mul", ["x", "two"], ["t_twice"]),
         helper.make_node("Relu", ["t_twice"], ["t_relu"]),
         helper.make_node("ReduceSum", ["x"], ["t_sum"], keepdims=0),
         const("zero", np.float32(0)), helper.make_node("Greater", ["t_sum", "zero"], ["t_pos"]),
         helper.make_node("If", ["t_pos"], ["t_inner"], then_branch=inner_then, else_branch=inner_else),
         helper.make_node("Add", ["t_relu", "t_inner"], ["t_out"])],
        "then", [], [helper.make_tensor_value_info("t_out", f, [4, 8])])
    else_branch = helper.make_graph(
        [const("thousand", np.int64(1000)), const("eight", np.int64(8)),
         helper.make_node("Div", ["sr", "thousand"], ["e_k"]),
         helper.make_node("Sub", ["e_k", "eight"], ["e_index"]),
         helper.make_node("Gather", ["x", "e_index"], ["e_col"], axis=1),
         const("axes", np.array([1], np.int64)),
         helper.make_node("Unsqueeze", ["e_col", "axes"], ["e_col2"]),
         helper.make_node("Add", ["x", "e_col2"], ["e_out"])],
        "else", [], [helper.make_tensor_value_info("e_out", f, [4, 8])])
    nodes = [const("rate", np.int64(16000)), helper.make_node("Equal", ["sr", "rate"], ["is16k"]),
             helper.make_node("If", ["is16k"], ["y"], then_branch=then_branch, else_branch=else_branch)]
    graph = helper.make_graph(nodes, "vad_like",
                              [helper.make_tensor_value_info("x", f, [4, 8]),
                               helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
                              [helper.make_tensor_value_info("y", f, [4, 8])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def if_reference(x, sr):
    x = x.astype(np.float64)
    if sr == 16000:
        return np.maximum(2 * x, 0) + (x + 1 if x.sum() > 0 else x - 1)
    return x + x[:, [sr // 1000 - 8]]


def run(clrun, folder, model_path, inputs, extra, env=None):
    out = os.path.join(folder, "out")
    args = [clrun, "run", model_path, "--repeat", "1", "--output-dir", out] + extra
    for key, value in inputs.items():
        np.save(os.path.join(folder, key + ".npy"), value)
        args += ["--input", f"{key}={os.path.join(folder, key + '.npy')}"]
    proc = subprocess.run(args, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        return None, proc.stderr.strip()
    return np.load(os.path.join(out, "y.npy")), ""


def check_if(clrun, work):
    ok = True
    model = if_model()
    rng = np.random.default_rng(20260425)
    for sr in (16000, 8000):
        for sign in (1, -1):
            name = f"if_sr{sr}_{'pos' if sign > 0 else 'neg'}"
            folder = os.path.join(work, name)
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, "model.onnx")
            onnx.save(model, path)
            x = (rng.standard_normal((4, 8)) + sign * 0.5).astype(np.float32)
            want = if_reference(x, sr)
            inputs = {"x": x, "sr": np.array(sr, np.int64)}
            results = {}
            for mode in ALLOCATORS:
                results[mode], err = run(clrun, folder, path, inputs, ["--allocator", mode])
                if results[mode] is None:
                    print(f"FAIL {name} ({mode}): {err}")
                    return False
            env = dict(os.environ, CLRUN_FUSION="0")
            results["fusion off"], err = run(clrun, folder, path, inputs, [], env)
            if results["fusion off"] is None:
                print(f"FAIL {name} (fusion off): {err}")
                return False
            fixed, err = run(clrun, folder, path, {"x": x}, ["--const", f"sr={sr}"])
            if fixed is None:
                print(f"FAIL {name} (sr fixed at load): {err}")
                return False
            results["sr fixed"] = fixed
            got = results[ALLOCATORS[0]]
            diff = np.abs(got.astype(np.float64) - want).max()
            if got.shape != want.shape or not diff <= TOLERANCE:
                print(f"FAIL {name}: differs from the reference by {diff:.3g}")
                ok = False
                continue
            same = [k for k, v in results.items() if v.tobytes() != got.tobytes()]
            if same:
                print(f"FAIL {name}: not bit-identical under {', '.join(same)}")
                ok = False
                continue
            print(f"PASS {name}: within {diff:.2g} of the reference, identical under "
                  f"{', '.join(results)}")
    return ok


def main():
    clrun, work = sys.argv[1], sys.argv[2]
    ok = check_if(clrun, work)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
