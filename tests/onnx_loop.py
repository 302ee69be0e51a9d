#!/usr/bin/python3
"""Loop run at run time through clrun (`clrun run MODEL.onnx --input ... --output-dir`): models
built here with the onnx package whose trip count M and condition are fed when the model runs,
so the body's schedule runs once per iteration (docs/onnx.md, Loop):

  counter     y += 1 and s += float(i), the condition passed through; M of 0, 1 and 7, and an
              initial condition false (no iteration: the initial values come out)
  early_exit  y = 1.5 y + b (b from the outer scope); the body stops once sum(y) >= limit,
              a value it computes from data; M of 50 (the condition ends it first) and 2
  matmul      h = h @ W + c, W a weight fed at run time and c an initializer, both read by the
              body from the outer scope; x = x + 1 carried beside it
  branchy     an If on the carried value's sum inside the body (its guard read per iteration)
  nested      a Loop (trip count N fed too) in the body, reading the outer body's value
  const_start M, cond and the start constants, the condition from a value fed at run time

Each against a numpy reference (float32 arithmetic step by step: exact for the counter, within
1e-5 for the others), bit-identical under tlsf, buddy, planned, naive, with CLRUN_FUSION=0 and
with CLRUN_QUEUE=out-of-order,
and bit-identical to the same model with M (and the condition) fixed at load with --const,
which unrolls the Loop where it can. Bad input: a negative and a huge trip count fail the run
naming the Loop; a float condition is refused at load naming it.
Usage: onnx_loop.py CLRUN WORKDIR"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_common import close, model, run, some_modes, vi  # noqa: E402

MODES = some_modes(["tlsf", "buddy", "planned", "naive"])
I64, BOOL = TensorProto.INT64, TensorProto.BOOL


def loop_model(name, body, carried, outputs, extra_inputs=(), inits=(), cond_type=BOOL):
    node = helper.make_node("Loop", ["M", "go"] + [c[0] for c in carried], [o[0] for o in outputs],
                            body=body, name="the_loop")
    inputs = [vi("M", [], I64), vi("go", [], cond_type)] + [vi(n, d) for n, d in carried] + list(extra_inputs)
    return model([node], inputs, [vi(n, d) for n, d in outputs], 13, inits)


def counter():
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.float32(1), "one")),
         helper.make_node("Add", ["y_in", "one"], ["y_out"]),
         helper.make_node("Cast", ["i"], ["i_f"], to=TensorProto.FLOAT),
         helper.make_node("Add", ["s_in", "i_f"], ["s_out"])],
        "body", [vi("i", [], I64), vi("c_in", [], BOOL), vi("y_in", [4]), vi("s_in", [2, 3])],
        [vi("c_out", [], BOOL), vi("y_out", [4]), vi("s_out", [2, 3])])
    return loop_model("counter", body, [("y0", [4]), ("s0", [2, 3])], [("y", [4]), ("s", [2, 3])])


def counter_ref(inputs):
    y, s = inputs["y0"].copy(), inputs["s0"].copy()
    if inputs["go"]:
        for i in range(int(inputs["M"])):
            y = y + np.float32(1)
            s = s + np.float32(i)
    return {"y": y, "s": s}


def early_exit():
    body = helper.make_graph(
        [helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.float32(1.5), "k")),
         helper.make_node("Mul", ["y_in", "k"], ["y1"]), helper.make_node("Add", ["y1", "b"], ["y_out"]),
         helper.make_node("ReduceSum", ["y_out"], ["tot"], keepdims=0),
         helper.make_node("Constant", [], ["limit"], value=numpy_helper.from_array(np.float32(100), "limit")),
         helper.make_node("Less", ["tot", "limit"], ["c_out"])],
        "body", [vi("i", [], I64), vi("c_in", [], BOOL), vi("y_in", [5])],
        [vi("c_out", [], BOOL), vi("y_out", [5])])
    return loop_model("early_exit", body, [("y0", [5])], [("y", [5])], [vi("b", [5])])


def early_exit_ref(inputs):
    y, b = inputs["y0"].copy(), inputs["b"]
    go = bool(inputs["go"])
    for _ in range(int(inputs["M"])):
        if not go:
            break
        y = y * np.float32(1.5) + b
        go = bool(np.sum(y, dtype=np.float32) < np.float32(100))
    return {"y": y}


def matmul():
    c = np.linspace(-0.5, 0.5, 6, dtype=np.float32).reshape(1, 6)
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("MatMul", ["h_in", "W"], ["hw"]), helper.make_node("Add", ["hw", "c"], ["h_out"]),
         helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.float32(1), "one")),
         helper.make_node("Add", ["x_in", "one"], ["x_out"])],
        "body", [vi("i", [], I64), vi("c_in", [], BOOL), vi("h_in", [3, 6]), vi("x_in", [2])],
        [vi("c_out", [], BOOL), vi("h_out", [3, 6]), vi("x_out", [2])])
    return loop_model("matmul", body, [("h0", [3, 6]), ("x0", [2])], [("h", [3, 6]), ("x", [2])],
                      [vi("W", [6, 6])], [numpy_helper.from_array(c, "c")]), c


def matmul_ref(inputs, c):
    h, x = inputs["h0"].astype(np.float64), inputs["x0"].copy()
    for _ in range(int(inputs["M"])):
        h = h @ inputs["W"].astype(np.float64) + c
        x = x + np.float32(1)
    return {"h": h, "x": x}


def branchy():
    """An If on data inside the body (its guard read again in every iteration): y - 1 when
    sum(y) > 0, else y + 2."""
    then_b = helper.make_graph([helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.float32(1), "one")),
                                helper.make_node("Sub", ["y_in", "one"], ["down"])], "t", [], [vi("down", [3])])
    else_b = helper.make_graph([helper.make_node("Constant", [], ["two"], value=numpy_helper.from_array(np.float32(2), "two")),
                                helper.make_node("Add", ["y_in", "two"], ["up"])], "e", [], [vi("up", [3])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("ReduceSum", ["y_in"], ["tot"], keepdims=0),
         helper.make_node("Constant", [], ["z"], value=numpy_helper.from_array(np.float32(0), "z")),
         helper.make_node("Greater", ["tot", "z"], ["pos"]),
         helper.make_node("If", ["pos"], ["y_out"], then_branch=then_b, else_branch=else_b)],
        "body", [vi("i", [], I64), vi("c_in", [], BOOL), vi("y_in", [3])], [vi("c_out", [], BOOL), vi("y_out", [3])])
    return loop_model("branchy", body, [("y0", [3])], [("y", [3])])


def branchy_ref(inputs):
    y = inputs["y0"].copy()
    for _ in range(int(inputs["M"])):
        y = y - np.float32(1) if np.sum(y, dtype=np.float32) > 0 else y + np.float32(2)
    return {"y": y}


def nested():
    """A Loop in the body of a Loop, both with trip counts fed at run time; the inner body reads
    the outer body's carried value from the scope above: z = 0.5 z + y, N times from z = y."""
    inner = helper.make_graph(
        [helper.make_node("Identity", ["ic_in"], ["ic_out"]),
         helper.make_node("Constant", [], ["half"], value=numpy_helper.from_array(np.float32(0.5), "half")),
         helper.make_node("Mul", ["z_in", "half"], ["zh"]), helper.make_node("Add", ["zh", "y_in"], ["z_out"])],
        "inner", [vi("j", [], I64), vi("ic_in", [], BOOL), vi("z_in", [4])], [vi("ic_out", [], BOOL), vi("z_out", [4])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Loop", ["N", "", "y_in"], ["y_out"], body=inner, name="inner_loop")],
        "body", [vi("i", [], I64), vi("c_in", [], BOOL), vi("y_in", [4])], [vi("c_out", [], BOOL), vi("y_out", [4])])
    return loop_model("nested", body, [("y0", [4])], [("y", [4])], [vi("N", [], I64)])


def nested_ref(inputs):
    y = inputs["y0"].copy()
    for _ in range(int(inputs["M"])):
        z = y.copy()
        for _ in range(int(inputs["N"])):
            z = z * np.float32(0.5) + y
        y = z
    return {"y": y}


def check(clrun, work, name, m, inputs, want, tolerance, fixed):
    """Runs m under every mode and with fusion off, then with `fixed` (the --const options):
    whether all agree bit for bit and with the reference."""
    names = list(want)
    results = {}
    for mode in MODES:
        results[mode], err = run(clrun, os.path.join(work, name), m, inputs, names, ["--allocator", mode])
        if results[mode] is None:
            print(f"FAIL {name} ({mode}): {err}")
            return False
    os.environ["CLRUN_FUSION"] = "0"
    results["fusion off"], err = run(clrun, os.path.join(work, name), m, inputs, names)
    del os.environ["CLRUN_FUSION"]
    if results["fusion off"] is None:
        print(f"FAIL {name} (fusion off): {err}")
        return False
    os.environ["CLRUN_QUEUE"] = "out-of-order"  # where the device has one
    results["out-of-order queue"], err = run(clrun, os.path.join(work, name), m, inputs, names)
    del os.environ["CLRUN_QUEUE"]
    if results["out-of-order queue"] is None:
        print(f"FAIL {name} (out-of-order queue): {err}")
        return False
    fed = {k: v for k, v in inputs.items() if k not in ("M", "go")}
    consts = [a for k in ("M", "go") for a in ("--const", f"{k}={int(inputs[k])}")]
    results["fixed at load"], err = run(clrun, os.path.join(work, name + "_fixed"), m, fed, names, consts)
    if results["fixed at load"] is None:
        print(f"FAIL {name} (M fixed at load): {err}")
        return False
    got = results[MODES[0]]
    for key in names:
        within, what = close(got[key], np.asarray(want[key]).astype(got[key].dtype), tolerance)
        if not within:
            print(f"FAIL {name}: {key} differs from the reference: {what}")
            return False
        other = [k for k, r in results.items() if r[key].tobytes() != got[key].tobytes()]
        if other:
            print(f"FAIL {name}: {key} not bit-identical under {', '.join(other)}")
            return False
    print(f"PASS {name}: M={int(inputs['M'])} go={bool(inputs['go'])}: within {tolerance:g} of the "
          f"reference, identical under {', '.join(results)}")
    return True


def refused(clrun, work, name, m, inputs, words):
    got, err = run(clrun, os.path.join(work, name), m, inputs, ["y"])
    if got is not None or any(w not in err for w in words):
        print(f"FAIL {name}: not refused with {words}: {err or 'it ran'}")
        return False
    print(f"PASS {name}: refused: {err.splitlines()[-1][:200]}")
    return True


def main():
    clrun, work = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(20260525)
    ok = True
    m = counter()
    for trip, go in ((7, True), (1, True), (0, True), (4, False)):
        inputs = {"M": np.array(trip, np.int64), "go": np.array(go),
                  "y0": rng.standard_normal(4).astype(np.float32),
                  "s0": rng.standard_normal((2, 3)).astype(np.float32)}
        ok = check(clrun, work, f"counter_{trip}_{int(go)}", m, inputs, counter_ref(inputs), 0, True) and ok
    m = early_exit()
    for trip in (50, 2):
        inputs = {"M": np.array(trip, np.int64), "go": np.array(True),
                  "y0": rng.uniform(0.5, 1, 5).astype(np.float32), "b": rng.uniform(0, 1, 5).astype(np.float32)}
        want = early_exit_ref(inputs)
        ok = check(clrun, work, f"early_exit_{trip}", m, inputs, want, 1e-5, True) and ok
    m, c = matmul()
    inputs = {"M": np.array(5, np.int64), "go": np.array(True),
              "h0": rng.standard_normal((3, 6)).astype(np.float32),
              "x0": rng.standard_normal(2).astype(np.float32),
              "W": (rng.standard_normal((6, 6)) * 0.4).astype(np.float32)}
    ok = check(clrun, work, "matmul", m, inputs, matmul_ref(inputs, c), 1e-5, True) and ok
    m = branchy()
    inputs = {"M": np.array(6, np.int64), "go": np.array(True), "y0": np.array([0.5, -0.25, 0.1], np.float32)}
    ok = check(clrun, work, "branchy", m, inputs, branchy_ref(inputs), 0, True) and ok
    m = nested()
    inputs = {"M": np.array(3, np.int64), "go": np.array(True), "N": np.array(4, np.int64),
              "y0": rng.standard_normal(4).astype(np.float32)}
    ok = check(clrun, work, "nested", m, inputs, nested_ref(inputs), 1e-5, True) and ok
    # M, cond and the carried value's start all initializers, the condition from data fed at
    # run time through the carried value: run per iteration (unrolling cannot fold it)
    body = helper.make_graph(
        [helper.make_node("Add", ["v_in", "b"], ["v_out"]),
         helper.make_node("ReduceSum", ["v_out"], ["tot"], keepdims=0),
         helper.make_node("Constant", [], ["lim"], value=numpy_helper.from_array(np.float32(10), "lim")),
         helper.make_node("Less", ["tot", "lim"], ["c_out"])],
        "body", [vi("i", [], I64), vi("c_in", [], BOOL), vi("v_in", [2])], [vi("c_out", [], BOOL), vi("v_out", [2])])
    node = helper.make_node("Loop", ["M", "go", "v0"], ["y"], body=body, name="the_loop")
    m = model([node], [vi("b", [2])], [vi("y", [2])], 13,
              [numpy_helper.from_array(np.int64(20), "M"), numpy_helper.from_array(np.bool_(True), "go"),
               numpy_helper.from_array(np.zeros(2, np.float32), "v0")])
    b = np.array([0.75, 0.5], np.float32)
    v = np.zeros(2, np.float32)
    for _ in range(20):
        v = v + b
        if not np.sum(v, dtype=np.float32) < np.float32(10):
            break
    got = {}
    for mode in ("tlsf", "planned"):
        got[mode], err = run(clrun, os.path.join(work, "const_start"), m, {"b": b}, ["y"], ["--allocator", mode])
        if got[mode] is None:
            print(f"FAIL const_start ({mode}): {err}")
            ok = False
            break
    else:
        if got["tlsf"]["y"].tobytes() != v.tobytes() or got["planned"]["y"].tobytes() != v.tobytes():
            print(f"FAIL const_start: {got['tlsf']['y']} / {got['planned']['y']}, expected {v}")
            ok = False
        else:
            print("PASS const_start: a constant start made data by the body, run per iteration, exact")
    # a trip count past the most iterations, the body ending the loop from a counter that starts
    # at a constant (nothing of it fed): it runs until the body's condition ends it
    body = helper.make_graph(
        [helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.float32(1), "one")),
         helper.make_node("Add", ["n_in", "one"], ["n_out"]),
         helper.make_node("Constant", [], ["ten"], value=numpy_helper.from_array(np.float32(10), "ten")),
         helper.make_node("Less", ["n_out", "ten"], ["c_out"])],
        "body", [vi("i", [], I64), vi("c_in", [], BOOL), vi("n_in", [1])], [vi("c_out", [], BOOL), vi("n_out", [1])])
    node = helper.make_node("Loop", ["M", "go", "n0"], ["y"], body=body, name="the_loop")
    m = model([node], [vi("M", [], I64), vi("go", [], BOOL)], [vi("y", [1])], 13,
              [numpy_helper.from_array(np.zeros(1, np.float32), "n0")])
    got, err = run(clrun, os.path.join(work, "counter_ends"), m, {"M": np.array(1 << 40, np.int64),
                                                                   "go": np.array(True)}, ["y"])
    if got is None or got["y"].tolist() != [10.0]:
        print(f"FAIL counter_ends: {err or got}")
        ok = False
    else:
        print("PASS counter_ends: a trip count of 2^40 ended by the body's counter after 10 iterations")
    # bad input
    m = counter()
    base = {"y0": np.zeros(4, np.float32), "s0": np.zeros((2, 3), np.float32), "go": np.array(True)}
    ok = refused(clrun, work, "negative_trip", m, dict(base, M=np.array(-3, np.int64)),
                 ["Loop 'the_loop'", "'M' is -3"]) and ok
    ok = refused(clrun, work, "huge_trip", m, dict(base, M=np.array(1 << 40, np.int64)),
                 ["Loop 'the_loop'", "at most"]) and ok
    bad = early_exit()
    bad.graph.input[1].type.tensor_type.elem_type = TensorProto.FLOAT
    ok = refused(clrun, work, "float_cond", bad, {"M": np.array(3, np.int64), "go": np.array(1, np.float32),
                                                  "y0": np.ones(5, np.float32), "b": np.ones(5, np.float32)},
                 ["the_loop", "'go' is not one bool element"]) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
