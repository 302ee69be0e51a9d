#!/usr/bin/python3
"""Scan run per iteration through clrun (`clrun run MODEL.onnx --input ... --output-dir`): a Scan
whose steps times its body's nodes exceed CLRUN_SCAN_UNROLL (default 256) is imported once and
run per iteration by the Loop machinery (docs/onnx.md, Scan); a shorter one is unrolled at load.
Models built here with the onnx package (opset 11):

  mixed   two states (h[3], s[2, 2]) and two scan inputs (x[L, 3] forward on axis 0, u[2, L]
          reversed on axis 1), two scan outputs (tanh(h) stacked forward on axis 0, 2u
          stacked reversed on axis 1); L = 6 unrolled (CLRUN_SCAN_UNROLL=1000) and forced
          per iteration (CLRUN_SCAN_UNROLL=0): bit-identical to each other, under tlsf, buddy,
          planned, naive and with CLRUN_FUSION=0
  passthrough  a state passed through, a scan output that is the reversed input's slice, an
          int64 scan input on axis 1 with an outer-scope value, an output axis of -1
  long    the same body over 5,000 steps, which unrolling refuses (at most 4,096): under
          planned, tlsf and with CLRUN_FUSION=0 (each run takes about 2 s)

Each against a numpy reference (float32 step by step; tanh within 1e-5). Bad input (mismatched
lengths, an input or output axis out of range, a scan output whose shape the body does not
declare, a body of the wrong arity) is refused at load naming the Scan, the run per iteration
forced.
Usage: onnx_scan.py CLRUN WORKDIR"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_common import close, model, run, some_modes, vi  # noqa: E402

MODES = some_modes(["tlsf", "buddy", "planned", "naive"])


def scan_model(length, in_axes=(0, 1), out_axes=(0, 1), y2_dims=(2,), arity_extra=False, u_len=None):
    u_len = length if u_len is None else u_len
    nodes = [helper.make_node("Constant", [], ["half"], value=numpy_helper.from_array(np.float32(0.5), "half")),
             helper.make_node("Constant", [], ["two"], value=numpy_helper.from_array(np.float32(2), "two")),
             helper.make_node("Mul", ["h_in", "half"], ["hh"]), helper.make_node("Add", ["hh", "x_t"], ["h_out"]),
             helper.make_node("Add", ["s_in", "u_t"], ["s_out"]),
             helper.make_node("Tanh", ["h_out"], ["y1"]), helper.make_node("Mul", ["u_t", "two"], ["y2"])]
    outputs = [vi("h_out", [3]), vi("s_out", [2, 2]), vi("y1", [3]), vi("y2", y2_dims and list(y2_dims))]
    if arity_extra:
        outputs.append(vi("hh", [3]))
    body = helper.make_graph(nodes, "body", [vi("h_in", [3]), vi("s_in", [2, 2]), vi("x_t", [3]), vi("u_t", [2])],
                             outputs)
    node = helper.make_node("Scan", ["h0", "s0", "x", "u"], ["h", "s", "ys1", "ys2"], body=body, name="the_scan",
                            num_scan_inputs=2, scan_input_axes=list(in_axes), scan_input_directions=[0, 1],
                            scan_output_axes=list(out_axes), scan_output_directions=[0, 1])
    inputs = [vi("h0", [3]), vi("s0", [2, 2]), vi("x", [length, 3]), vi("u", [2, u_len])]
    outs = [vi("h", [3]), vi("s", [2, 2]), vi("ys1", [length, 3]), vi("ys2", [2, length])]
    return model([node], inputs, outs, 11)


def scan_ref(inputs):
    h, s, x, u = (inputs[k].copy() for k in ("h0", "s0", "x", "u"))
    length = x.shape[0]
    ys1 = np.zeros((length, 3), np.float32)
    ys2 = np.zeros((2, length), np.float32)
    for t in range(length):
        u_t = u[:, length - 1 - t]
        h = h * np.float32(0.5) + x[t]
        s = s + u_t
        ys1[t] = np.tanh(h)
        ys2[:, length - 1 - t] = u_t * np.float32(2)
    return {"h": h, "s": s, "ys1": ys1, "ys2": ys2}


def run_all(clrun, work, name, m, inputs, names, unroll, modes):
    """{setting: outputs} under every mode and with fusion off, or (None, what failed)."""
    results = {}
    os.environ["CLRUN_SCAN_UNROLL"] = unroll
    try:
        for mode in modes:
            results[mode], err = run(clrun, os.path.join(work, name), m, inputs, names, ["--allocator", mode])
            if results[mode] is None:
                return None, f"{mode}: {err}"
        os.environ["CLRUN_FUSION"] = "0"
        results["fusion off"], err = run(clrun, os.path.join(work, name), m, inputs, names)
        del os.environ["CLRUN_FUSION"]
        if results["fusion off"] is None:
            return None, f"fusion off: {err}"
    finally:
        del os.environ["CLRUN_SCAN_UNROLL"]
    return results, ""


def check(clrun, work, name, m, inputs, settings, modes=MODES, want=None):
    """Runs m under each CLRUN_SCAN_UNROLL of settings: every run bit-identical, and within 1e-5 of
    the reference (scan_ref's unless given)."""
    want = scan_ref(inputs) if want is None else want
    names = list(want)
    results = {}
    for unroll in settings:
        got, err = run_all(clrun, work, f"{name}_{unroll}", m, inputs, names, unroll, modes)
        if got is None:
            print(f"FAIL {name} (CLRUN_SCAN_UNROLL={unroll}): {err}")
            return False
        results.update({f"{k} (CLRUN_SCAN_UNROLL={unroll})": v for k, v in got.items()})
    first = next(iter(results.values()))
    for key in names:
        within, what = close(first[key], want[key], 1e-5)
        if not within:
            print(f"FAIL {name}: {key} differs from the reference: {what}")
            return False
        other = [k for k, r in results.items() if r[key].tobytes() != first[key].tobytes()]
        if other:
            print(f"FAIL {name}: {key} not bit-identical under {', '.join(other)}")
            return False
    print(f"PASS {name}: within 1e-5 of the reference, identical under {', '.join(results)}")
    return True


def passthrough():
    """A state the body passes through, a scan output that is the scan input's slice (reversed,
    on axis 1), an int64 scan input on axis 1 plus an outer-scope value, stacked on axis -1."""
    i64 = TensorProto.INT64
    body = helper.make_graph([helper.make_node("Identity", ["s_in"], ["s_out"]),
                              helper.make_node("Identity", ["x_t"], ["y"]),
                              helper.make_node("Add", ["k_t", "off"], ["z"])],
                             "body", [vi("s_in", [2]), vi("x_t", [2]), vi("k_t", [3], i64)],
                             [vi("s_out", [2]), vi("y", [2]), vi("z", [3], i64)])
    node = helper.make_node("Scan", ["s0", "x", "k"], ["s", "ys", "zs"], body=body, num_scan_inputs=2,
                            name="the_scan", scan_input_axes=[0, 1], scan_output_axes=[1, -1],
                            scan_output_directions=[1, 0])
    return model([node], [vi("s0", [2]), vi("x", [5, 2]), vi("k", [3, 5], i64), vi("off", [3], i64)],
                 [vi("s", [2]), vi("ys", [2, 5]), vi("zs", [3, 5], i64)], 16)


def refused(clrun, work, name, m, inputs, words):
    os.environ["CLRUN_SCAN_UNROLL"] = "0"
    got, err = run(clrun, os.path.join(work, name), m, inputs, ["h"])
    del os.environ["CLRUN_SCAN_UNROLL"]
    if got is not None or any(w not in err for w in words):
        print(f"FAIL {name}: not refused with {words}: {err or 'it ran'}")
        return False
    print(f"PASS {name}: refused: {err.splitlines()[-1][:200]}")
    return True


def feeds(rng, length, u_len=None):
    return {"h0": rng.standard_normal(3).astype(np.float32), "s0": rng.standard_normal((2, 2)).astype(np.float32),
            "x": rng.standard_normal((length, 3)).astype(np.float32),
            "u": rng.standard_normal((2, length if u_len is None else u_len)).astype(np.float32)}


def main():
    clrun, work = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(20261206)
    ok = check(clrun, work, "mixed", scan_model(6), feeds(rng, 6), ["1000", "0"])
    inputs = {"s0": rng.standard_normal(2).astype(np.float32), "x": rng.standard_normal((5, 2)).astype(np.float32),
              "k": rng.integers(-9, 9, (3, 5)).astype(np.int64), "off": np.array([1, 2, 3], np.int64)}
    want = {"s": inputs["s0"], "ys": np.ascontiguousarray(inputs["x"][::-1].T),
            "zs": inputs["k"] + inputs["off"][:, None]}
    ok = check(clrun, work, "passthrough", passthrough(), inputs, ["1000", "0"],
               some_modes(["planned", "naive"]), want=want) and ok
    ok = check(clrun, work, "long", scan_model(5000), feeds(rng, 5000), ["256"],
               some_modes(["planned", "tlsf"])) and ok
    ok = refused(clrun, work, "mismatched", scan_model(6, u_len=5), feeds(rng, 6, 5),
                 ["the_scan", "6 and 5 steps"]) and ok
    ok = refused(clrun, work, "output_axis", scan_model(6, out_axes=(0, 3)), feeds(rng, 6),
                 ["the_scan", "axis 3 is outside"]) and ok
    ok = refused(clrun, work, "input_axis", scan_model(6, in_axes=(0, 2)), feeds(rng, 6),
                 ["the_scan", "scan_input_axes"]) and ok
    ok = refused(clrun, work, "undeclared", scan_model(6, y2_dims=None), feeds(rng, 6),
                 ["the_scan", "scan output 1 'y2' to declare its element type and every dimension"]) and ok
    ok = refused(clrun, work, "arity", scan_model(6, arity_extra=True), feeds(rng, 6),
                 ["the_scan", "the body takes 4 inputs and gives 5 outputs"]) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
