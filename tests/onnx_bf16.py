#!/usr/bin/python3
"""bfloat16 storage through `clrun run MODEL.onnx --output-dir`, against numpy (which has no
bfloat16: the reference rounds by bit manipulation, to nearest even, every NaN as 0x7fc0):

  Cast FLOAT -> BFLOAT16 -> FLOAT (the rounding, bit for bit), DOUBLE and INT64/INT32 ->
  BFLOAT16 (rounded once, not through a float rounded first), CastLike, a BFLOAT16 initializer
  widened by Cast, a BFLOAT16 -> INT32 Cast (truncating), `--weights bf16` on a MatMul model
  (its output is the product with bf16-rounded weights, its report the error against f32),
  elementwise ops on bf16 values (Mul, Relu, Sub, Less: in float, each result rounded once), and
  an op that does not take bf16 (MatMul) refused naming the node and the value.
Usage: onnx_bf16.py CLRUN WORKDIR"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from onnx_common import model, run, vi

F, BF16 = TensorProto.FLOAT, TensorProto.BFLOAT16


def bf16_bits_of_f32(x):
    """uint16 bits of float32 x rounded to nearest even; NaN as 0x7fc0."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    top, rest = u >> np.uint64(16), u & np.uint64(0xFFFF)
    up = ((rest > 0x8000) | ((rest == 0x8000) & ((top & np.uint64(1)) == 1))).astype(np.uint64)
    bits = (top + up).astype(np.uint16)
    return np.where(np.isnan(np.asarray(x, np.float32)), np.uint16(0x7FC0), bits)


def f32_of_bf16_bits(b):
    return (np.asarray(b, np.uint32) << 16).astype(np.uint32).view(np.float32)


def round_to_odd_f32(x):
    """float64 (or exact integers as float64 of fewer than 54 bits) to float32, toward zero, the
    last bit set when inexact: a second rounding to bf16 is then the value's own."""
    x = np.asarray(x, np.float64)
    f = x.astype(np.float32)
    over = np.abs(f.astype(np.float64)) > np.abs(x)
    f = np.where(over, np.nextafter(f, np.float32(0)), f)
    inexact = f.astype(np.float64) != x
    bits = f.view(np.uint32) | inexact.astype(np.uint32)
    return np.where(np.isnan(x), np.float32(np.nan), bits.view(np.float32))


def bf16_of_int(v):
    """bf16 value (as float64) of int64 values, rounded once to nearest even."""
    out = []
    for n in np.asarray(v, np.int64).ravel().tolist():
        m, neg = abs(int(n)), n < 0
        top = m.bit_length() - 1
        if top >= 8:
            drop = top - 7
            keep, rest, half = m >> drop, m & ((1 << drop) - 1), 1 << (drop - 1)
            if rest > half or (rest == half and keep & 1):
                keep += 1
            m = keep << drop
        out.append(-float(m) if neg else float(m))
    return np.array(out, np.float64).reshape(np.shape(v))


def roundtrip(name, x_elem, cast_to=F):
    nodes = [helper.make_node("Cast", ["x"], ["b"], to=BF16), helper.make_node("Cast", ["b"], ["y"], to=cast_to)]
    return nodes


def cases(rng):
    out = []
    # float32: random values, ties at every position that matters, specials
    x = rng.standard_normal(4096).astype(np.float32) * np.float32(1000)
    ties = (rng.integers(0, 2 ** 15, 64, dtype=np.uint32) << 16 | 0x8000).astype(np.uint32).view(np.float32)
    ties = ties[np.isfinite(ties)]
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.4028235e38, 1e-40, -1e-45, 1.0, 1.00390625],
                       np.float32)
    x = np.concatenate([x, ties, special]).astype(np.float32)
    want = f32_of_bf16_bits(bf16_bits_of_f32(x))
    out.append(("cast_f32_bf16_f32", model(roundtrip("", F), [vi("x", x.shape)], [vi("y", None)]), {"x": x},
                {"y": want}))
    # double: rounded once (a double just above a bf16 tie must round up)
    d = np.concatenate([rng.standard_normal(512) * 100,
                        [1.0 + 2.0 ** -8 + 2.0 ** -40, 1.0 + 2.0 ** -8 - 2.0 ** -40, 1.0 + 2.0 ** -8]])
    want = f32_of_bf16_bits(bf16_bits_of_f32(round_to_odd_f32(d)))
    out.append(("cast_f64_bf16_f32", model(roundtrip("", TensorProto.DOUBLE), [vi("x", d.shape, TensorProto.DOUBLE)],
                                           [vi("y", None)]), {"x": d}, {"y": want}))
    # integers: int64 beyond 2^53 and int32, rounded once
    i64 = np.concatenate([rng.integers(-2 ** 62, 2 ** 62, 256, dtype=np.int64),
                          np.array([2 ** 24 + 2 ** 16 + 1, 0x1008001, 257, -257, 0, 7, 2 ** 63 - 1, -2 ** 63], np.int64)])
    out.append(("cast_i64_bf16_f32", model(roundtrip("", TensorProto.INT64), [vi("x", i64.shape, TensorProto.INT64)],
                                           [vi("y", None)]), {"x": i64}, {"y": bf16_of_int(i64).astype(np.float32)}))
    i32 = rng.integers(-2 ** 31, 2 ** 31, 256, dtype=np.int64).astype(np.int32)
    out.append(("cast_i32_bf16_f32", model(roundtrip("", TensorProto.INT32), [vi("x", i32.shape, TensorProto.INT32)],
                                           [vi("y", None)]), {"x": i32}, {"y": bf16_of_int(i32).astype(np.float32)}))
    # bf16 -> int32 truncates (from the bf16 value)
    xs = (rng.standard_normal(64) * 300).astype(np.float32)
    nodes = [helper.make_node("Cast", ["x"], ["b"], to=BF16), helper.make_node("Cast", ["b"], ["y"], to=TensorProto.INT32)]
    out.append(("cast_bf16_i32", model(nodes, [vi("x", xs.shape)], [vi("y", None, TensorProto.INT32)]), {"x": xs},
                {"y": np.trunc(f32_of_bf16_bits(bf16_bits_of_f32(xs))).astype(np.int32)}))
    # CastLike (opset 15) with a bf16 'like' initializer, then back
    like = helper.make_tensor("like", BF16, [1], bf16_bits_of_f32(np.ones(1, np.float32)).tobytes(), raw=True)
    nodes = [helper.make_node("CastLike", ["x", "like"], ["b"]), helper.make_node("Cast", ["b"], ["y"], to=F)]
    xl = rng.standard_normal(37).astype(np.float32)
    out.append(("castlike15_bf16", model(nodes, [vi("x", xl.shape)], [vi("y", None)], 15, [like]), {"x": xl},
                {"y": f32_of_bf16_bits(bf16_bits_of_f32(xl))}))
    # a bf16 initializer (raw_data, the bits) widened by Cast and added to a float input
    w = rng.standard_normal((3, 5)).astype(np.float32)
    wbits = bf16_bits_of_f32(w)
    init = helper.make_tensor("w", BF16, w.shape, wbits.tobytes(), raw=True)
    nodes = [helper.make_node("Cast", ["w"], ["wf"], to=F), helper.make_node("Add", ["x", "wf"], ["y"])]
    xa = rng.standard_normal((3, 5)).astype(np.float32)
    out.append(("bf16_initializer", model(nodes, [vi("x", xa.shape)], [vi("y", None)], 13, [init]), {"x": xa},
                {"y": xa + f32_of_bf16_bits(wbits)}))
    # elementwise on bf16 values: computed in float from the bf16 operands, rounded once stored
    a = (rng.standard_normal((4, 6)) * 10).astype(np.float32)
    b = (rng.standard_normal((6,)) * 10).astype(np.float32)
    fa, fb = f32_of_bf16_bits(bf16_bits_of_f32(a)), f32_of_bf16_bits(bf16_bits_of_f32(b))
    nodes = [helper.make_node("Cast", ["a"], ["ab"], to=BF16), helper.make_node("Cast", ["b"], ["bb"], to=BF16),
             helper.make_node("Mul", ["ab", "bb"], ["m"]), helper.make_node("Relu", ["m"], ["r"]),
             helper.make_node("Sub", ["r", "bb"], ["s"]), helper.make_node("Cast", ["s"], ["y"], to=F),
             helper.make_node("Less", ["ab", "bb"], ["less"])]
    r = f32_of_bf16_bits(bf16_bits_of_f32(np.maximum(f32_of_bf16_bits(bf16_bits_of_f32(fa * fb)), 0)))
    s = f32_of_bf16_bits(bf16_bits_of_f32(r - fb))
    out.append(("bf16_mul_relu_sub_less", model(nodes, [vi("a", a.shape), vi("b", b.shape)],
                                                [vi("y", None), vi("less", None, TensorProto.BOOL)]),
                {"a": a, "b": b}, {"y": s, "less": fa < fb}))
    return out


def main():
    clrun, work = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(20261205)
    ok = True
    for name, m, inputs, expected in cases(rng):
        got, err = run(clrun, os.path.join(work, name), m, inputs, list(expected))
        if got is None:
            print(f"FAIL {name}: {err}")
            ok = False
            continue
        for key, want in expected.items():
            g = got[key]
            same = g.dtype == want.dtype and g.shape == want.shape and (
                np.array_equal(g.view(np.uint32), want.view(np.uint32)) if want.dtype == np.float32
                and not np.isnan(want).any() else np.array_equal(g, want, equal_nan=want.dtype.kind == "f"))
            if not same:
                bad = np.flatnonzero(g.ravel() != want.ravel()) if g.shape == want.shape else []
                print(f"FAIL {name}: {key} differs at {list(bad[:4])}: got {g.ravel()[bad[:4]] if len(bad) else g.shape}, "
                      f"expected {want.ravel()[bad[:4]] if len(bad) else want.shape}")
                ok = False
                break
        else:
            print(f"PASS {name}")
    # --weights bf16: a MatMul's f32 weight stored as bf16, widened at each run
    x = rng.standard_normal((4, 64)).astype(np.float32)
    wt = rng.standard_normal((64, 48)).astype(np.float32)
    m = model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", x.shape)], [vi("y", None)], 13,
              [numpy_helper.from_array(wt, "w")])
    got, report = run(clrun, os.path.join(work, "weights_bf16"), m, {"x": x}, ["y"], ["--weights", "bf16"])
    want = x.astype(np.float64) @ f32_of_bf16_bits(bf16_bits_of_f32(wt)).astype(np.float64)
    if got is None or "stored as bf16" not in report:
        print(f"FAIL weights_bf16: {report}")
        ok = False
    elif np.abs(got["y"] - want).max() > 1e-4:
        print(f"FAIL weights_bf16: max error {np.abs(got['y'] - want).max():.3g} against the bf16 weights' product")
        ok = False
    else:
        line = [l for l in report.splitlines() if "stored as bf16" in l][0]
        print(f"PASS weights_bf16: {line.strip()}")
    # refusals: an op that does not take bf16, named with the node and the value
    nodes = [helper.make_node("Cast", ["x"], ["b"], to=BF16),
             helper.make_node("MatMul", ["b", "b"], ["y"], name="matmul_bf16")]
    m = model(nodes, [vi("x", [4, 4])], [vi("y", None, BF16)])
    got, err = run(clrun, os.path.join(work, "matmul_bf16"), m, {"x": np.ones((4, 4), np.float32)}, ["y"])
    words = ("matmul_bf16", "bf16[4, 4]")
    if got is not None or not all(w in err for w in words):
        print(f"FAIL matmul_bf16: not refused with {words}: {err or 'it ran'}")
        ok = False
    else:
        print("PASS matmul_bf16: refused by name")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
