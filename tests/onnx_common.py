"""What the ONNX script tests (tests/onnx_*.py) share: value infos and initializers, a model of
some nodes at a chosen opset (set by hand: Debian's onnx 1.12 knows opset 17, so the checker is
not run), a model run through `clrun run MODEL.onnx --input ... --output-dir`, and the
comparison of an output with its reference."""
import os
import subprocess

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def test_rounds(full):
    """CLRUN_TEST_ROUNDS (a positive integer) when set, else `full`: read as tests/device_test.h
    reads it for the C tests."""
    text = os.environ.get("CLRUN_TEST_ROUNDS")
    if text is None:
        return full
    if not text.isdigit() or not 1 <= int(text) <= 1000000:
        print(f"CLRUN_TEST_ROUNDS='{text}' is not a positive integer: running {full} rounds")
        return full
    return int(text)


def some_modes(modes):
    """The first CLRUN_TEST_ROUNDS of `modes` (all of them when it is not set): the sanitizer
    build and distcheck run every model under fewer allocator modes; the plain build runs all."""
    modes = list(modes)
    return modes[:min(len(modes), test_rounds(len(modes)))]


def vi(name, dims, elem=F):
    return helper.make_tensor_value_info(name, elem, dims)


def init(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def model(nodes, inputs, outputs, opset=13, inits=()):
    """One graph of `nodes` (a node or a list) importing the default domain at `opset`."""
    nodes = nodes if isinstance(nodes, (list, tuple)) else [nodes]
    graph = helper.make_graph(list(nodes), "opset%d" % opset, inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def run(clrun, folder, m, inputs, names, extra=()):
    """Saves m and the inputs (.npy) under folder and runs it: ({name: array} of the outputs
    named, clrun's standard output), or (None, its standard error) when it failed."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    onnx.save(m, path)
    out = os.path.join(folder, "out")
    args = [clrun, "run", path, "--repeat", "1", "--output-dir", out] + list(extra)
    for key, value in inputs.items():
        np.save(os.path.join(folder, key + ".npy"), value)
        args += ["--input", f"{key}={os.path.join(folder, key + '.npy')}"]
    proc = subprocess.run(args, capture_output=True, text=True, errors="replace")
    if proc.returncode != 0:
        return None, proc.stderr.strip()
    return {k: np.load(os.path.join(out, k + ".npy")) for k in names}, proc.stdout


def close(got, want, tolerance):
    """(within, what): integers and booleans exactly (and of the same type); floats within
    tolerance, relative above 1, NaN and infinities in the same places."""
    if got.shape != want.shape:
        return False, f"shape {got.shape}, expected {want.shape}"
    if want.dtype.kind in "biu":
        same = got.dtype == want.dtype and np.array_equal(got, want)
        return same, "" if same else f"got {got.ravel()[:8]}, expected {want.ravel()[:8]} ({got.dtype})"
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    nan, inf = np.isnan(want64), np.isinf(want64)
    if not np.array_equal(nan, np.isnan(got64)) or not np.array_equal(got64[inf], want64[inf]):
        return False, "NaN or infinities in different places"
    finite = ~(nan | inf)
    err = np.abs(got64[finite] - want64[finite]) / np.maximum(1.0, np.abs(want64[finite]))
    worst = float(err.max()) if err.size else 0.0
    return bool(worst <= tolerance), f"{worst:.3g}"


def refusals_hold(clrun, work, cases):
    """Runs each (name, model, inputs, words) of cases, printing PASS where clrun refused it
    with those words in its message, else FAIL: whether all were."""
    ok = True
    for name, m, inputs, words in cases:
        got, err = run(clrun, os.path.join(work, name), m, inputs, ["y"])
        if got is not None or words not in err:
            print(f"FAIL {name}: not refused with '{words}': {err or 'it ran'}")
            ok = False
        else:
            print(f"PASS {name}: refused: {err.splitlines()[-1][:160]}")
    return ok
