#!/usr/bin/python3
"""If with a condition known only at run time through clrun (`clrun run MODEL.onnx --input ...
--output-dir`): a model built here with the onnx package, as voice-activity detectors are made,
whose If branches on a sample-rate input fed at run time:

  x = 1.5 x_raw + 0.25 before the If, y = 0.5 If(...) + 0.125 after it (fusion groups those)
  sr == 16000   then_branch: relu(2 x) plus a nested If on sum(x) > 0 (x + 1, else x - 1), every
                branch reading x from the outer scope
  otherwise     else_branch: x plus column (sr / 1000 - 8) of x, a Gather whose index is out of
                range when sr is 16000 (the branch is skipped then: the run must not fail)

Run for sr 16000 and 8000, and x of either sign (both sides of the nested If), against a numpy
reference: within 1e-6, and bit-identical under every allocator and with fusion off. The same
model with sr fixed at load (`--const sr=...`) gives the same bits.

Scan and Loop, unrolled at load, against numpy (within 1e-5, the same bits under buddy and
planned): Scan 11 with two scan inputs on different axes and directions, outputs on axes 0 and -1
(one reversed), an outer-scope read in the body; Scan 8 with a batch of 2 run backward; Loop 13
with a constant trip count and a body condition that stops it early; a Loop whose trip count is
fed at run time refused naming it, and unrolled once `--const` fixes it.
Usage: onnx_control.py CLRUN WORKDIR"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_common import some_modes

ALLOCATORS = some_modes(["tlsf", "buddy", "slab", "bump", "naive", "planned"])
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
    # unguarded elementwise work before and after the If, which fusion groups
    nodes = [const("scale", np.float32(1.5)), const("shift", np.float32(0.25)),
             helper.make_node("Mul", ["x_raw", "scale"], ["x_scaled"]), helper.make_node("Add", ["x_scaled", "shift"], ["x"]),
             const("rate", np.int64(16000)), helper.make_node("Equal", ["sr", "rate"], ["is16k"]),
             helper.make_node("If", ["is16k"], ["branched"], then_branch=then_branch, else_branch=else_branch),
             const("half", np.float32(0.5)), helper.make_node("Mul", ["branched", "half"], ["halved"]),
             const("eighth", np.float32(0.125)), helper.make_node("Add", ["halved", "eighth"], ["y"])]
    graph = helper.make_graph(nodes, "vad_like",
                              [helper.make_tensor_value_info("x_raw", f, [4, 8]),
                               helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
                              [helper.make_tensor_value_info("y", f, [4, 8])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def if_reference(x_raw, sr):
    x = (x_raw * np.float32(1.5) + np.float32(0.25)).astype(np.float64)
    if sr == 16000:
        y = np.maximum(2 * x, 0) + (x + 1 if x.sum() > 0 else x - 1)
    else:
        y = x + x[:, [sr // 1000 - 8]]
    return y * 0.5 + 0.125


def run(clrun, folder, model_path, inputs, extra, env=None):
    out = os.path.join(folder, "out")
    args = [clrun, "run", model_path, "--repeat", "1", "--output-dir", out] + extra
    for key, value in inputs.items():
        np.save(os.path.join(folder, key + ".npy"), value)
        args += ["--input", f"{key}={os.path.join(folder, key + '.npy')}"]
    proc = subprocess.run(args, capture_output=True, text=True, errors="replace", env=env)
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
            x = (rng.standard_normal((4, 8)) + sign * 0.5).astype(np.float32)  # the sign of sum(x)
            want = if_reference(x, sr)
            inputs = {"x_raw": x, "sr": np.array(sr, np.int64)}
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
            fixed, err = run(clrun, folder, path, {"x_raw": x}, ["--const", f"sr={sr}"])
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


# ---- Scan and Loop, unrolled at load ----

def vi(name, dims, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, dims)


def scan11_case(rng):
    """Scan 11: a state, scan input a along axis 1 forward, b along axis 0 backward, the body
    reading w from the outer scope; outputs stacked on axis 0 forward and on axis -1 backward."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["a_t", "b_t"], ["ab"]), helper.make_node("Add", ["s_in", "ab"], ["s1"]),
         helper.make_node("Add", ["s1", "w"], ["s_out"]), helper.make_node("Sub", ["a_t", "b_t"], ["d"])],
        "body", [vi("s_in", [2]), vi("a_t", [2]), vi("b_t", [2])], [vi("s_out", [2]), vi("ys", [2]), vi("d", [2])])
    body.node.append(helper.make_node("Identity", ["s_out"], ["ys"]))
    node = helper.make_node("Scan", ["s0", "a", "b"], ["s_final", "y1", "y2"], body=body, num_scan_inputs=2,
                            scan_input_axes=[1, 0], scan_input_directions=[0, 1], scan_output_axes=[0, -1],
                            scan_output_directions=[0, 1])
    graph = helper.make_graph([node], "scan11", [vi("s0", [2]), vi("a", [2, 5]), vi("b", [5, 2]), vi("w", [2])],
                              [vi("s_final", [2]), vi("y1", [5, 2]), vi("y2", [2, 5])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    inputs = {"s0": rng.standard_normal(2), "a": rng.standard_normal((2, 5)), "b": rng.standard_normal((5, 2)),
              "w": rng.standard_normal(2)}
    inputs = {k: v.astype(np.float32) for k, v in inputs.items()}
    x = {k: v.astype(np.float64) for k, v in inputs.items()}
    s, y1, y2 = x["s0"], [], []
    for t in range(5):
        at, bt = x["a"][:, t], x["b"][4 - t]
        s = s + at * bt + x["w"]
        y1.append(s)
        y2.append(at - bt)
    expected = {"s_final": s, "y1": np.stack(y1, 0), "y2": np.stack(y2[::-1], 1)}
    return "scan11", model, inputs, expected


def scan8_case(rng):
    """Scan 8: a batch of 2, the sequence run backward."""
    body = helper.make_graph([helper.make_node("Add", ["acc", "x_t"], ["acc_out"]),
                              helper.make_node("Identity", ["acc_out"], ["seen"])],
                             "body", [vi("acc", [3]), vi("x_t", [3])], [vi("acc_out", [3]), vi("seen", [3])])
    node = helper.make_node("Scan", ["", "init", "xs"], ["total", "partial"], body=body, num_scan_inputs=1,
                            directions=[1])
    graph = helper.make_graph([node], "scan8", [vi("init", [2, 3]), vi("xs", [2, 4, 3])],
                              [vi("total", [2, 3]), vi("partial", [2, 4, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)])
    inputs = {"init": rng.standard_normal((2, 3)).astype(np.float32),
              "xs": rng.standard_normal((2, 4, 3)).astype(np.float32)}
    x = {k: v.astype(np.float64) for k, v in inputs.items()}
    partial = np.cumsum(x["xs"][:, ::-1], axis=1) + x["init"][:, None, :]
    return "scan8", model, inputs, {"total": partial[:, -1], "partial": partial}


def loop_body(opset):
    """y_out = 2 y_in + i; stops once i reaches 2 (the condition folds at load); scans y_out."""
    two = numpy_helper.from_array(np.float32(2), "two")
    body = helper.make_graph(
        [helper.make_node("Constant", [], ["lim"], value=numpy_helper.from_array(np.int64(2), "lim")),
         helper.make_node("Less", ["i", "lim"], ["c_out"]),
         helper.make_node("Cast", ["i"], ["i_f"], to=TensorProto.FLOAT),
         helper.make_node("Constant", [], ["two"], value=two),
         helper.make_node("Mul", ["y_in", "two"], ["y2"]), helper.make_node("Add", ["y2", "i_f"], ["y_out"]),
         helper.make_node("Identity", ["y_out"], ["y_scan"])],
        "body", [vi("i", [], TensorProto.INT64), vi("c_in", [], TensorProto.BOOL), vi("y_in", [3])],
        [vi("c_out", [], TensorProto.BOOL), vi("y_out", [3]), vi("y_scan", [3])])
    return body


def loop_case(rng):
    node = helper.make_node("Loop", ["M", "go", "y0"], ["y_final", "ys"], body=loop_body(13))
    graph = helper.make_graph([node], "loop13", [vi("y0", [3])], [vi("y_final", [3]), vi("ys", [3, 3])],
                              [numpy_helper.from_array(np.int64(10), "M"), numpy_helper.from_array(np.bool_(True), "go")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    inputs = {"y0": rng.standard_normal(3).astype(np.float32)}
    y, ys = inputs["y0"].astype(np.float64), []
    for i in range(3):  # i = 0, 1, 2; the condition after i = 2 is false
        y = 2 * y + i
        ys.append(y)
    return "loop13", model, inputs, {"y_final": y, "ys": np.stack(ys)}


def scan_if_case(rng):
    """Scan 9 whose body branches on its step's data (an If at run time in every unrolled step,
    each its own guard): s + x_t when sum(x_t) > 0, else s - x_t."""
    then_b = helper.make_graph([helper.make_node("Add", ["s_in", "x_t"], ["up"])], "up", [], [vi("up", [2])])
    else_b = helper.make_graph([helper.make_node("Sub", ["s_in", "x_t"], ["down"])], "down", [], [vi("down", [2])])
    body = helper.make_graph(
        [helper.make_node("ReduceSum", ["x_t"], ["tot"], keepdims=0),
         helper.make_node("Constant", [], ["z"], value=numpy_helper.from_array(np.float32(0), "z")),
         helper.make_node("Greater", ["tot", "z"], ["pos"]),
         helper.make_node("If", ["pos"], ["s_out"], then_branch=then_b, else_branch=else_b),
         helper.make_node("Identity", ["s_out"], ["trace"])],
        "body", [vi("s_in", [2]), vi("x_t", [2])], [vi("s_out", [2]), vi("trace", [2])])
    node = helper.make_node("Scan", ["s0", "x"], ["s_final", "steps"], body=body, num_scan_inputs=1)
    graph = helper.make_graph([node], "scan_if", [vi("s0", [2]), vi("x", [6, 2])],
                              [vi("s_final", [2]), vi("steps", [6, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    inputs = {"s0": rng.standard_normal(2).astype(np.float32), "x": rng.standard_normal((6, 2)).astype(np.float32)}
    s, steps = inputs["s0"].astype(np.float64), []
    for xt in inputs["x"].astype(np.float64):
        s = s + xt if xt.sum() > 0 else s - xt
        steps.append(s)
    return "scan_if", model, inputs, {"s_final": s, "steps": np.stack(steps)}


def run_outputs(clrun, folder, path, inputs, names, extra):
    out = os.path.join(folder, "out")
    args = [clrun, "run", path, "--repeat", "1", "--output-dir", out] + extra
    for key, value in inputs.items():
        np.save(os.path.join(folder, key + ".npy"), value)
        args += ["--input", f"{key}={os.path.join(folder, key + '.npy')}"]
    proc = subprocess.run(args, capture_output=True, text=True, errors="replace")
    if proc.returncode != 0:
        return None, proc.stderr.strip()
    return {k: np.load(os.path.join(out, k + ".npy")) for k in names}, ""


def check_unrolled(clrun, work):
    ok = True
    rng = np.random.default_rng(20260426)
    for name, model, inputs, expected in (scan11_case(rng), scan8_case(rng), loop_case(rng),
                                                scan_if_case(rng)):
        onnx.checker.check_model(model)
        folder = os.path.join(work, name)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "model.onnx")
        onnx.save(model, path)
        results = {}
        for mode in ("buddy", "planned"):
            results[mode], err = run_outputs(clrun, folder, path, inputs, expected, ["--allocator", mode])
            if results[mode] is None:
                print(f"FAIL {name} ({mode}): {err}")
                return False
        worst = 0.0
        for key, want in expected.items():
            got = results["buddy"][key]
            if got.shape != want.shape:
                print(f"FAIL {name}: {key} has shape {got.shape}, expected {want.shape}")
                ok = False
                continue
            worst = max(worst, np.abs(got - want).max())
            if not np.abs(got - want).max() <= 1e-5 or got.tobytes() != results["planned"][key].tobytes():
                print(f"FAIL {name}: {key} differs from the reference by {np.abs(got - want).max():.3g} "
                      f"or between allocators")
                ok = False
        if ok:
            print(f"PASS {name}: {', '.join(expected)} within {worst:.2g} of the reference")
    # a trip count fed at run time: refused, naming it
    node = helper.make_node("Loop", ["M", "go", "y0"], ["y_final", "ys"], body=loop_body(13))
    graph = helper.make_graph([node], "loop_fed", [vi("M", [], TensorProto.INT64), vi("y0", [3])],
                              [vi("y_final", [3]), vi("ys", [3, 3])], [numpy_helper.from_array(np.bool_(True), "go")])
    folder = os.path.join(work, "loop_fed")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    got, err = run_outputs(clrun, folder, path, {"M": np.array(3, np.int64), "y0": np.ones(3, np.float32)},
                           ["y_final"], [])
    if got is not None or "(the trip count) 'M' must be known at load time" not in err:
        print(f"FAIL loop_fed: not refused by name: {err}")
        ok = False
    else:
        print("PASS loop_fed: a trip count fed at run time is refused, naming it")
    got, err = run_outputs(clrun, folder, path, {"y0": np.ones(3, np.float32)}, ["y_final"], ["--const", "M=3"])
    if got is None or got["y_final"].tolist() != [12, 12, 12]:
        print(f"FAIL loop_fed with --const M=3: {err or got}")
        ok = False
    else:
        print("PASS loop_fed with --const M=3: unrolled")
    # branches of an If at run time that give different shapes: refused, naming both
    then_b = helper.make_graph([helper.make_node("Identity", ["v"], ["tv"])], "t", [], [vi("tv", [2, 3])])
    else_b = helper.make_graph([helper.make_node("Transpose", ["v"], ["ev"])], "e", [], [vi("ev", [3, 2])])
    graph = helper.make_graph([helper.make_node("If", ["c"], ["out"], then_branch=then_b, else_branch=else_b)],
                              "if_shapes", [vi("c", [], TensorProto.BOOL), vi("v", [2, 3])], [vi("out", None)])
    folder = os.path.join(work, "if_shapes")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    got, err = run_outputs(clrun, folder, path, {"c": np.array(True), "v": np.ones((2, 3), np.float32)}, ["out"], [])
    if got is not None or "the then_branch gives 'tv' float[2, 3], the else_branch 'ev' float[3, 2]" not in err:
        print(f"FAIL if_shapes: not refused naming both branches' outputs: {err}")
        ok = False
    else:
        print("PASS if_shapes: branches of different shapes refused, naming both")
    return ok


def main():
    clrun, work = sys.argv[1], sys.argv[2]
    ok = check_if(clrun, work)
    ok = check_unrolled(clrun, work) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
