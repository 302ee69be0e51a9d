#!/usr/bin/python3
"""Writes an ONNX model with the structure of a clrun .graph file, for timing the same network in
another runtime (bench/bench_models_ort.sh). Only the ops of the generated models are mapped
(conv2d, relu, add, minimum, maxpool2d, global_avgpool, matmul, layernorm, softmax without
causal, gelu_erf, reshape, transpose); weights are random with the graph's shapes, so the
numbers are not compared, only the time. Needs Debian's python3-onnx and python3-numpy.

Usage: graph_to_onnx.py IN.graph OUT.onnx
"""
import math
import re
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

LINE = re.compile(r"^(input|const|node|output|graph)\s+(.*)$")
TYPE = re.compile(r"^([\w.]+):\s*(\w+)\[([^\]]*)\]\s*(.*)$")


def dims(text):
    return [int(d) for d in text.split(",") if d.strip()]


def attributes(text):
    """key=value pairs: integers, floats, [lists]."""
    out = {}
    for key, value in re.findall(r"(\w+)=(\[[^\]]*\]|\S+)", text):
        if value.startswith("["):
            out[key] = [int(v) for v in value[1:-1].split(",") if v.strip()]
        elif re.fullmatch(r"-?\d+", value):
            out[key] = int(value)
        else:
            try:
                out[key] = float(value)
            except ValueError:
                out[key] = value
    return out


def pair(value, default):
    if value is None:
        return list(default)
    return [value, value] if isinstance(value, int) else list(value)


class Builder:
    def __init__(self):
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []
        self.shapes = {}
        self.counter = 0
        self.rng = np.random.default_rng(1)

    def fresh(self, base):
        self.counter += 1
        return f"{base}__{self.counter}"

    def const(self, name, array):
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def add(self, op, inputs, outputs, **attrs):
        self.nodes.append(helper.make_node(op, inputs, outputs, **attrs))

    def node(self, name, shape, op, args, attrs):
        a = args
        if op == "conv2d":
            stride, pad = pair(attrs.get("stride"), (1, 1)), pair(attrs.get("pad"), (0, 0))
            dilation = pair(attrs.get("dilation"), (1, 1))
            w = self.shapes[a[1]]
            self.add("Conv", a, [name], strides=stride, pads=pad + pad, dilations=dilation,
                     group=attrs.get("groups", 1), kernel_shape=w[2:])
        elif op in ("relu", "add", "minimum"):
            self.add({"relu": "Relu", "add": "Add", "minimum": "Min"}[op], a, [name])
        elif op == "maxpool2d":
            kernel = pair(attrs.get("kernel"), (1, 1))
            stride, pad = pair(attrs.get("stride"), kernel), pair(attrs.get("pad"), (0, 0))
            self.add("MaxPool", a, [name], kernel_shape=kernel, strides=stride, pads=pad + pad)
        elif op == "global_avgpool":
            pooled = self.fresh(name)
            self.add("GlobalAveragePool", a, [pooled])
            self.add("Flatten", [pooled], [name], axis=1)
        elif op == "matmul":
            left, right = a[0], a[1]
            for flag, which in (("transpose_a", 0), ("transpose_b", 1)):
                if attrs.get(flag):
                    rank = len(self.shapes[a[which]])
                    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
                    t = self.fresh(name)
                    self.add("Transpose", [a[which]], [t], perm=perm)
                    left, right = (t, right) if which == 0 else (left, t)
            result = name if len(a) < 3 and attrs.get("alpha", 1) == 1 else self.fresh(name)
            self.add("MatMul", [left, right], [result])
            if attrs.get("alpha", 1) != 1:
                scaled = name if len(a) < 3 else self.fresh(name)
                alpha = self.const(self.fresh("alpha"), np.array(attrs["alpha"], dtype=np.float32))
                self.add("Mul", [result, alpha], [scaled])
                result = scaled
            if len(a) == 3:
                self.add("Add", [result, a[2]], [name])
        elif op == "layernorm":
            self.add("LayerNormalization", a, [name], axis=-1, epsilon=float(attrs.get("eps", 1e-5)))
        elif op == "softmax":
            if attrs.get("causal"):
                raise SystemExit("graph_to_onnx: causal softmax is not mapped")
            self.add("Softmax", a, [name], axis=-1)
        elif op == "gelu_erf":
            x = a[0]
            scaled, erf, one_plus, half = (self.fresh(name) for _ in range(4))
            self.add("Mul", [x, self.const(self.fresh("c"), np.array(1 / math.sqrt(2), np.float32))], [scaled])
            self.add("Erf", [scaled], [erf])
            self.add("Add", [erf, self.const(self.fresh("c"), np.array(1, np.float32))], [one_plus])
            self.add("Mul", [x, self.const(self.fresh("c"), np.array(0.5, np.float32))], [half])
            self.add("Mul", [half, one_plus], [name])
        elif op == "reshape":
            self.add("Reshape", [a[0], self.const(self.fresh("shape"), np.array(shape, np.int64))], [name])
        elif op == "transpose":
            self.add("Transpose", a, [name], perm=attrs["perm"])
        else:
            raise SystemExit(f"graph_to_onnx: op '{op}' is not mapped")


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    b = Builder()
    graph_name = "graph"
    for raw in open(sys.argv[1]):
        line = raw.split("#", 1)[0].strip()
        m = LINE.match(line)
        if not m:
            continue
        kind, rest = m.groups()
        if kind == "graph":
            graph_name = rest.strip()
        elif kind == "output":
            b.outputs.append(helper.make_tensor_value_info(rest.strip(), TensorProto.FLOAT, b.shapes[rest.strip()]))
        elif kind in ("input", "const"):
            t = TYPE.match(rest)
            name, shape, fill = t.group(1), dims(t.group(3)), t.group(4)
            b.shapes[name] = shape
            if kind == "input":
                b.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
            elif fill.startswith("ones"):
                b.const(name, np.ones(shape, np.float32))
            elif fill.startswith("zeros"):
                b.const(name, np.zeros(shape, np.float32))
            else:
                b.const(name, (b.rng.standard_normal(shape) * 0.02).astype(np.float32))
        else:
            head, call = rest.split("=", 1)
            t = TYPE.match(head.strip() + " ")
            name, shape = t.group(1), dims(t.group(3))
            op, args_text, attrs_text = re.match(r"\s*(\w+)\(([^)]*)\)\s*(.*)$", call).groups()
            b.shapes[name] = shape
            b.node(name, shape, op, [s.strip() for s in args_text.split(",")], attributes(attrs_text))
    graph = helper.make_graph(b.nodes, graph_name, b.inputs, b.outputs, b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, sys.argv[2])


if __name__ == "__main__":
    main()
