#!/usr/bin/python3
"""DFT (opset 17: axis attribute; opset 20: axis input) and STFT (opset 17) through `clrun run
MODEL.onnx --output-dir`, against numpy.fft in double precision: real and complex signals, odd
lengths, dft_length shorter and longer than the signal, onesided, inverse, STFT with and without
a window and with frame_step from an initializer or fixed with --const. Each output within 1e-5
of the reference's largest magnitude. Bad input (a last dimension of 3, the axis on the complex
dimension, onesided with a complex signal, a window fed at run time, a double signal) refused
naming the node.
Usage: onnx_spectral.py CLRUN WORKDIR"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from onnx_common import model, run, vi

F = TensorProto.FLOAT
I64 = TensorProto.INT64
TOLERANCE = 1e-5


def scalar(name, value):
    return numpy_helper.from_array(np.array(value, dtype=np.int64), name)


def as_complex(x):
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0].astype(np.complex128)


def pair(z):
    return np.stack([z.real, z.imag], axis=-1)


def dft_ref(x, axis, length, inverse, onesided):
    z = as_complex(x.astype(np.float64))
    if onesided:
        return pair(np.fft.rfft(z.real, n=length, axis=axis))
    return pair((np.fft.ifft if inverse else np.fft.fft)(z, n=length, axis=axis))


def stft_ref(x, step, frame, window, onesided):
    z = as_complex(x.astype(np.float64))
    w = np.ones(frame) if window is None else window.astype(np.float64)
    count = (z.shape[1] - frame) // step + 1
    frames = np.stack([z[:, f * step:f * step + frame] * w for f in range(count)], axis=1)
    return pair(np.fft.rfft(frames.real, axis=-1) if onesided else np.fft.fft(frames, axis=-1))


def dft_cases(rng):
    """(name, model, feeds, reference)"""
    out = []
    for shape, axis, length, inverse, onesided in [
            ((2, 12, 3, 1), 1, None, 0, 0), ((2, 12, 3, 1), 2, None, 0, 0), ((1, 7, 2), 1, None, 0, 0),
            ((3, 13, 2), 1, None, 1, 0), ((2, 10, 1), 1, 8, 0, 0), ((2, 10, 1), 1, 16, 0, 0),
            ((2, 9, 4, 1), 1, None, 0, 1), ((2, 10, 1), 1, 15, 0, 1), ((1, 6, 5, 2), 2, 9, 1, 0)]:
        x = rng.standard_normal(shape).astype(np.float32)
        inits, ins = [], ["x"]
        if length is not None:
            inits.append(scalar("n", length))
            ins.append("n")
        node = helper.make_node("DFT", ins, ["y"], axis=axis, inverse=inverse, onesided=onesided)
        n = length if length is not None else shape[axis]
        ref = dft_ref(x, axis, n, inverse, onesided)
        m = model(node, [vi("x", list(shape))], [vi("y", list(ref.shape))], 17, inits)
        out.append((f"dft17 {shape} axis {axis} n {length} inverse {inverse} onesided {onesided}", m, {"x": x}, ref))
    for shape, axis, length, inverse in [((2, 5, 11, 2), None, None, 0), ((2, 6, 4, 1), 1, None, 0),
                                         ((2, 6, 4, 1), -3, None, 0), ((2, 9, 2), -2, 12, 1),
                                         ((7, 2), None, 5, 0)]:
        x = rng.standard_normal(shape).astype(np.float32)
        inits = []
        ins = ["x", ""]
        if length is not None:
            inits.append(scalar("n", length))
            ins[1] = "n"
        if axis is not None:
            inits.append(numpy_helper.from_array(np.array(axis, dtype=np.int64), "axis"))
            ins.append("axis")
        node = helper.make_node("DFT", ins, ["y"], inverse=inverse)
        a = -2 if axis is None else axis
        ref = dft_ref(x, a % len(shape), length or shape[a], inverse, 0)
        m = model(node, [vi("x", list(shape))], [vi("y", list(ref.shape))], 20, inits)
        out.append((f"dft20 {shape} axis {axis} n {length} inverse {inverse}", m, {"x": x}, ref))
    return out


def stft_cases(rng):
    out = []
    for length, c, step, frame, windowed, onesided in [
            (128, 1, 8, 16, False, 1), (128, 1, 8, 16, True, 1), (100, 1, 7, 15, True, 1),
            (64, 2, 4, 12, True, 0), (50, 1, 5, 10, False, 0)]:
        x = rng.standard_normal((2, length, c)).astype(np.float32)
        inits = [scalar("step", step)]
        ins = ["x", "step"]
        window = None
        if windowed:
            window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(frame) / frame)).astype(np.float32)
            inits.append(numpy_helper.from_array(window, "window"))
            ins.append("window")
        else:
            inits.append(scalar("frame", frame))
            ins += ["", "frame"]
        node = helper.make_node("STFT", ins, ["y"], onesided=onesided)
        ref = stft_ref(x, step, frame, window, onesided)
        m = model(node, [vi("x", [2, length, c])], [vi("y", list(ref.shape))], 17, inits)
        out.append((f"stft {length}x{c} step {step} frame {frame} window {windowed} onesided {onesided}",
                    m, {"x": x}, ref))
    return out


def check(clrun, tmp, name, m, feeds, ref, extra=()):
    got, err = run(clrun, os.path.join(tmp, name.replace(" ", "_")), m, feeds, ["y"], extra)
    got = got["y"] if got else None
    if got is None:
        print(f"FAIL {name}: {err}")
        return False
    scale = max(1.0, float(np.abs(ref).max()))
    if got.shape != ref.shape or not np.all(np.abs(got - ref) <= TOLERANCE * scale):
        diff = np.abs(got - ref).max() if got.shape == ref.shape else "shape %s" % (got.shape,)
        print(f"FAIL {name}: {diff} against {ref.shape}")
        return False
    print(f"PASS {name}")
    return True


def refusals(clrun, tmp, rng):
    bad = []
    x3 = vi("x", [1, 8, 3])
    bad.append(("last dimension 3", model(helper.make_node("DFT", ["x"], ["y"]), [x3], [vi("y", None)], 17),
                {"x": np.zeros((1, 8, 3), np.float32)}, "last dimension is 3"))
    bad.append(("axis on the pair", model(helper.make_node("DFT", ["x"], ["y"], axis=2), [vi("x", [1, 8, 2])],
                                          [vi("y", None)], 17),
                {"x": np.zeros((1, 8, 2), np.float32)}, "real/imaginary"))
    bad.append(("onesided complex", model(helper.make_node("DFT", ["x"], ["y"], onesided=1),
                                          [vi("x", [1, 8, 2])], [vi("y", None)], 17),
                {"x": np.zeros((1, 8, 2), np.float32)}, "onesided"))
    bad.append(("window at run time",
                model(helper.make_node("STFT", ["x", "step", "w"], ["y"]), [vi("x", [1, 32, 1]), vi("w", [8])],
                      [vi("y", None)], 17, [scalar("step", 4)]),
                {"x": np.zeros((1, 32, 1), np.float32), "w": np.ones(8, np.float32)}, "known at load"))
    bad.append(("a double signal", model(helper.make_node("DFT", ["x"], ["y"]), [vi("x", [1, 8, 1], TensorProto.DOUBLE)],
                                         [vi("y", None, TensorProto.DOUBLE)], 17),
                {"x": np.zeros((1, 8, 1), np.float64)}, "DFT of a double signal is not supported"))
    ok = True
    for name, m, feeds, words in bad:
        got, err = run(clrun, os.path.join(tmp, "bad_" + name.replace(" ", "_")), m, feeds, ["y"])
        if got is not None or words not in err or not ("(DFT, opset" in err or "(STFT, opset" in err):
            print(f"FAIL refusal {name}: {'ran' if got is not None else err}")
            ok = False
        else:
            print(f"PASS refusal {name}: {err.splitlines()[-1]}")
    return ok


def main():
    clrun, tmp = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(17)
    ok = True
    for name, m, feeds, ref in dft_cases(rng) + stft_cases(rng):
        ok = check(clrun, tmp, name, m, feeds, ref) and ok
    # frame_step fed as a graph input, fixed at load with --const
    x = rng.standard_normal((1, 96, 1)).astype(np.float32)
    node = helper.make_node("STFT", ["x", "step", "", "frame"], ["y"])
    ref = stft_ref(x, 6, 16, None, 1)
    m = model(node, [vi("x", [1, 96, 1]), vi("step", [], I64), vi("frame", [], I64)], [vi("y", list(ref.shape))], 17)
    ok = check(clrun, tmp, "stft const step", m, {"x": x}, ref, ["--const", "step=6", "--const", "frame=16"]) and ok
    ok = refusals(clrun, tmp, rng) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
