#!/usr/bin/python3
"""RNN, GRU and LSTM through clrun (`clrun run MODEL.onnx --input ... --output-dir`), which
unrolls them over the sequence at load:

  spec cases   one node each, built here with the onnx package, against a numpy reference of
               the spec's equations run entry by entry (each batch entry for its own length):
               every direction, activations with activation_alpha/beta, clip, hidden_size,
               LSTM's peepholes and input_forget, GRU's linear_before_reset, layout 1,
               sequence_lens known at load and fed at run time, initial states, weights fed at
               run time, outputs left unnamed, opsets 1, 3, 7 and 14, and a sequence longer
               than one concat takes
  torch        models exported by torch.onnx.export (Debian's PyTorch): a 2-layer LSTM then a
               GRU, and a bidirectional batch-first LSTM with its initial states fed then a
               bidirectional GRU, against torch's own outputs

Each output within 1e-4 of the reference (relative to its largest magnitude when above 1),
bit-identical under the buddy and planned allocators. The torch cases are skipped, saying so,
when this python3 has no torch. Usage: onnx_recurrent.py CLRUN WORKDIR"""
import os
import subprocess
import sys
import warnings

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_common import some_modes

RNG = np.random.default_rng(20260425)
MODES = some_modes(["buddy", "planned"])
TOLERANCE = 1e-4

# ---- the numpy reference ----

# name: (takes alpha, takes beta, alpha's default, beta's default), as onnxruntime reads them
ACTS = {
    "relu": (False, False, 0, 0), "tanh": (False, False, 0, 0), "sigmoid": (False, False, 0, 0),
    "affine": (True, True, 0, 0), "leakyrelu": (True, False, 0.01, 0),
    "thresholdedrelu": (True, False, 0, 0), "scaledtanh": (True, True, 0, 0),
    "hardsigmoid": (True, True, 0.2, 0.5), "elu": (True, False, 1.0, 0),
    "softsign": (False, False, 0, 0), "softplus": (False, False, 0, 0),
}
DEFAULTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


def apply(name, a, b, x):
    if name == "relu":
        return np.maximum(x, 0)
    if name == "tanh":
        return np.tanh(x)
    if name == "sigmoid":
        return 1 / (1 + np.exp(-x))
    if name == "affine":
        return a * x + b
    if name == "leakyrelu":
        return np.where(x >= 0, x, a * x)
    if name == "thresholdedrelu":
        return np.where(x > a, x, 0)
    if name == "scaledtanh":
        return a * np.tanh(b * x)
    if name == "hardsigmoid":
        return np.clip(a * x + b, 0, 1)
    if name == "elu":
        return np.where(x >= 0, x, a * (np.exp(x) - 1))
    if name == "softsign":
        return x / (1 + np.abs(x))
    return np.log1p(np.exp(x))  # softplus


def activations(kind, attrs, dirs):
    names = list(attrs.get("activations", DEFAULTS[kind]))
    if dirs == 2 and len(names) == len(DEFAULTS[kind]):
        names = names * 2
    alphas, betas = list(attrs.get("activation_alpha", [])), list(attrs.get("activation_beta", []))
    fns = []
    for name in names:
        name = name.lower()
        ta, tb, da, db = ACTS[name]
        a = (alphas.pop(0) if alphas else da) if ta else 0
        b = (betas.pop(0) if betas else db) if tb else 0
        fns.append(lambda x, n=name, a=a, b=b: apply(n, a, b, x))
    return fns


def reference(kind, attrs, X, W, R, B=None, lens=None, h0=None, c0=None, P=None):
    """Y, Y_h, Y_c by the spec's equations, each batch entry over its own length."""
    layout = attrs.get("layout", 0)
    if layout:
        X = X.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    X, W, R = X.astype(np.float64), W.astype(np.float64), R.astype(np.float64)
    S, N, _ = X.shape
    direction = attrs.get("direction", "forward")
    dirs = 2 if direction == "bidirectional" else 1
    H = R.shape[2]
    G = W.shape[1]
    clip = attrs.get("clip")
    cl = (lambda v: np.clip(v, -clip, clip)) if clip is not None else (lambda v: v)
    per = len(DEFAULTS[kind])
    fns = activations(kind, attrs, dirs)
    Y = np.zeros((S, dirs, N, H))
    Yh = np.zeros((dirs, N, H))
    Yc = np.zeros((dirs, N, H))
    for d in range(dirs):
        f = fns[d * per:(d + 1) * per]
        wb = np.zeros(G) if B is None else B[d, :G].astype(np.float64)
        rb = np.zeros(G) if B is None else B[d, G:].astype(np.float64)
        p = np.zeros(3 * H) if P is None else P[d].astype(np.float64)
        backward = direction == "reverse" or d == 1
        for n in range(N):
            length = S if lens is None else int(lens[n])
            h = np.zeros(H) if h0 is None else h0[d, n].astype(np.float64)
            c = np.zeros(H) if c0 is None else c0[d, n].astype(np.float64)
            for t in (reversed(range(length)) if backward else range(length)):
                gx, gh = W[d] @ X[t, n], R[d] @ h
                if kind == "RNN":
                    h = f[0](cl(gx + gh + wb + rb))
                elif kind == "GRU":
                    z = f[0](cl(gx[:H] + gh[:H] + wb[:H] + rb[:H]))
                    r = f[0](cl(gx[H:2 * H] + gh[H:2 * H] + wb[H:2 * H] + rb[H:2 * H]))
                    if attrs.get("linear_before_reset", 0):
                        hh = f[1](cl(gx[2 * H:] + r * (gh[2 * H:] + rb[2 * H:]) + wb[2 * H:]))
                    else:
                        hh = f[1](cl(gx[2 * H:] + R[d, 2 * H:] @ (r * h) + rb[2 * H:] + wb[2 * H:]))
                    h = (1 - z) * hh + z * h
                else:
                    g = gx + gh + wb + rb
                    i = f[0](cl(g[:H] + p[:H] * c))
                    if attrs.get("input_forget", 0):
                        fg = 1 - i
                    else:
                        fg = f[0](cl(g[2 * H:3 * H] + p[2 * H:] * c))
                    c = fg * c + i * f[1](cl(g[3 * H:]))
                    o = f[0](cl(g[H:2 * H] + p[H:2 * H] * c))
                    h = o * f[2](c)
                Y[t, d, n] = h
            Yh[d, n], Yc[d, n] = h, c
    if layout:
        return Y.transpose(2, 0, 1, 3), Yh.transpose(1, 0, 2), Yc.transpose(1, 0, 2)
    return Y, Yh, Yc


# ---- the spec cases ----

def case(name, kind, opset, attrs, S, N, I, H, has=(), fed=(), lens=None, outputs=("Y", "Y_h")):
    """One node: inputs in `has` (B, sequence_lens, initial_h, initial_c, P) beside X, W, R;
    those in `fed` are graph inputs (X always is), the others initializers."""
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    state = (N, dirs, H) if attrs.get("layout", 0) else (dirs, N, H)
    values = {
        "X": RNG.standard_normal((N, S, I) if attrs.get("layout", 0) else (S, N, I)).astype(np.float32),
        "W": (RNG.standard_normal((dirs, gates * H, I)) * 0.5).astype(np.float32),
        "R": (RNG.standard_normal((dirs, gates * H, H)) * 0.5).astype(np.float32),
        "B": (RNG.standard_normal((dirs, 2 * gates * H)) * 0.3).astype(np.float32),
        "sequence_lens": np.array(lens if lens is not None else [S] * N, np.int32),
        "initial_h": RNG.standard_normal(state).astype(np.float32),
        "initial_c": RNG.standard_normal(state).astype(np.float32),
        "P": (RNG.standard_normal((dirs, 3 * H)) * 0.5).astype(np.float32),
    }
    order = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
    used = [k for k in order if k in ("X", "W", "R") or k in has]
    last = max(order.index(k) for k in used)
    names = [k if k in used else "" for k in order[:last + 1]]
    attrs_onnx = dict(attrs, hidden_size=H)
    node = helper.make_node(kind, names, list(outputs), **attrs_onnx)
    inputs = [helper.make_tensor_value_info(k, TensorProto.INT32 if k == "sequence_lens" else TensorProto.FLOAT,
                                            values[k].shape) for k in used if k == "X" or k in fed]
    inits = [numpy_helper.from_array(values[k], k) for k in used if k != "X" and k not in fed]
    rename = {"initial_h": "h0", "initial_c": "c0", "sequence_lens": "lens"}
    ref = reference(kind, attrs, **{rename.get(k, k): values[k] for k in used})
    outs, expected = [], {}
    for k, want in zip(outputs, ref):
        if k:
            outs.append(helper.make_tensor_value_info(k, TensorProto.FLOAT, want.shape))
            expected[k] = want
    graph = helper.make_graph([node], name, inputs, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="clrun-tests")
    model.ir_version = 7
    onnx.checker.check_model(model)
    return name, model, {k: values[k] for k in used if k == "X" or k in fed}, expected


def spec_cases():
    yield case("rnn_reverse_relu_clip", "RNN", 14, dict(direction="reverse", activations=["Relu"], clip=0.8),
               4, 3, 5, 4, has=("B", "initial_h"))
    yield case("rnn_bidirectional_alpha_beta", "RNN", 7,
               dict(direction="bidirectional", activations=["LeakyRelu", "ScaledTanh"],
                    activation_alpha=[0.1, 0.7], activation_beta=[1.3]),
               3, 2, 3, 5, has=("B",), outputs=("Y",))
    yield case("rnn_opset1_affine", "RNN", 1, dict(output_sequence=1, activations=["Affine"],
                                                   activation_alpha=[0.5], activation_beta=[0.1]),
               3, 2, 4, 3, has=("B",))
    yield case("gru_bidirectional_lengths_at_load", "GRU", 14,
               dict(direction="bidirectional", activations=["Sigmoid", "Softsign", "HardSigmoid", "Tanh"],
                    activation_alpha=[0.3], activation_beta=[0.4]),
               5, 4, 3, 4, has=("B", "sequence_lens", "initial_h"), lens=[5, 2, 3, 1])
    yield case("gru_reverse_linear_before_reset_fed_batchwise", "GRU", 14,
               dict(direction="reverse", linear_before_reset=1, layout=1, clip=2.0,
                    activations=["Sigmoid", "Softplus"]),
               4, 3, 2, 5, has=("B", "sequence_lens", "initial_h"), fed=("sequence_lens", "initial_h"),
               lens=[2, 4, 3])
    yield case("gru_opset3_weights_fed", "GRU", 3, dict(linear_before_reset=1), 3, 2, 3, 4,
               has=("B",), fed=("W", "R", "B"))
    yield case("gru_opset7_no_bias", "GRU", 7, dict(direction="bidirectional"), 3, 2, 3, 4, outputs=("", "Y_h"))
    yield case("lstm_bidirectional_peepholes_lengths_fed", "LSTM", 14,
               dict(direction="bidirectional", clip=1.5), 5, 3, 4, 3,
               has=("B", "sequence_lens", "initial_h", "initial_c", "P"), fed=("sequence_lens",),
               lens=[5, 3, 1], outputs=("Y", "Y_h", "Y_c"))
    yield case("lstm_input_forget_batchwise", "LSTM", 14,
               dict(layout=1, input_forget=1, activations=["HardSigmoid", "Elu", "Softsign"],
                    activation_alpha=[0.25, 0.9], activation_beta=[0.45]),
               4, 2, 3, 4, has=("B", "initial_h", "initial_c", "P"), outputs=("", "", "Y_c"))
    yield case("lstm_opset7_reverse_thresholded", "LSTM", 7,
               dict(direction="reverse", activations=["Sigmoid", "ThresholdedRelu", "Tanh"],
                    activation_alpha=[0.2]),
               4, 3, 2, 3, has=("B", "sequence_lens"), lens=[4, 1, 2], outputs=("", "Y_h", "Y_c"))
    yield case("lstm_opset1", "LSTM", 1, dict(output_sequence=0), 3, 2, 3, 2, has=("B",))
    yield case("lstm_long_sequence", "LSTM", 14, dict(direction="bidirectional"), 80, 2, 3, 4,
               has=("B", "initial_h"))


# ---- the torch cases ----

def torch_cases(work):
    try:
        import torch
    except ImportError as e:
        print(f"SKIP torch: {sys.executable} cannot import torch ({e})")
        return
    torch.manual_seed(2026)

    class Stacked(torch.nn.Module):
        """A 2-layer LSTM, then a GRU, sequence-major."""

        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(8, 16, num_layers=2)
            self.gru = torch.nn.GRU(16, 12)

        def forward(self, x):
            y, (h, c) = self.lstm(x)
            z, hz = self.gru(y)
            return z, hz, h, c

    class Bidirectional(torch.nn.Module):
        """A bidirectional batch-first LSTM from fed initial states, then a bidirectional GRU."""

        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(6, 10, batch_first=True, bidirectional=True)
            self.gru = torch.nn.GRU(20, 8, batch_first=True, bidirectional=True)

        def forward(self, x, h0, c0):
            y, (h, c) = self.lstm(x, (h0, c0))
            z, hz = self.gru(y)
            return z, hz, h, c

    made = [
        ("torch_lstm2_gru", Stacked(), {"x": torch.randn(7, 3, 8)}),
        ("torch_bidirectional", Bidirectional(),
         {"x": torch.randn(2, 6, 6), "h0": torch.randn(2, 2, 10), "c0": torch.randn(2, 2, 10)}),
    ]
    for name, module, feeds in made:
        module.eval()
        path = os.path.join(work, name + ".onnx")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(module, tuple(feeds.values()), path, input_names=list(feeds),
                              output_names=["z", "hz", "h", "c"])
        with torch.no_grad():
            want = [t.numpy().astype(np.float64) for t in module(*feeds.values())]
        yield name, onnx.load(path), {k: v.numpy() for k, v in feeds.items()}, dict(zip(["z", "hz", "h", "c"], want))


# ---- running ----

def run_model(clrun, work, name, model, inputs, expected):
    folder = os.path.join(work, name)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    onnx.save(model, path)
    args = []
    for key, value in inputs.items():
        np.save(os.path.join(folder, key + ".npy"), value)
        args += ["--input", f"{key}={os.path.join(folder, key + '.npy')}"]
    results = {}
    for mode in MODES:
        out = os.path.join(folder, "out-" + mode)
        proc = subprocess.run([clrun, "run", path, "--allocator", mode, "--repeat", "1", "--output-dir", out] + args,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"FAIL {name} ({mode}): exit {proc.returncode}: {proc.stderr.strip()}")
            return False
        results[mode] = {k: np.load(os.path.join(out, k + ".npy")) for k in expected}
    ok, worst = True, 0.0
    for key, want in expected.items():
        got = results[MODES[0]][key]
        if got.shape != want.shape:
            print(f"FAIL {name}: output {key} has shape {got.shape}, expected {want.shape}")
            return False
        err = np.abs(got.astype(np.float64) - want).max() / max(np.abs(want).max(), 1.0)
        worst = max(worst, err)
        if not err <= TOLERANCE:
            print(f"FAIL {name}: output {key} differs from the reference by {err:.3g}")
            ok = False
        for mode in MODES[1:]:
            if results[mode][key].tobytes() != got.tobytes():
                print(f"FAIL {name}: output {key} under {mode} differs from {MODES[0]} (not bit-identical)")
                ok = False
    if ok:
        print(f"PASS {name}: {', '.join(expected)} within {worst:.2g} of the reference, identical in "
              f"{', '.join(MODES)}")
    return ok


def main():
    clrun, work = sys.argv[1], sys.argv[2]
    ok = True
    for name, model, inputs, expected in spec_cases():
        ok = run_model(clrun, work, name, model, inputs, expected) and ok
    for name, model, inputs, expected in torch_cases(work):
        ok = run_model(clrun, work, name, model, inputs, expected) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
