"""What the data-parallel CLI tests (tests/cli_train_mpi.sh, cli_train_mpi_det.sh,
cli_train_devices.sh) share, through cli_common.sh's digits_mlp and same_params:

  train_digits.py make OUT [wide]  the digits (as tests/cli_train.sh makes them; 384 rows: 12
                                   steps of 32) as OUT/x.npy and OUT/y.npy, and OUT/mlp.onnx, an
                                   MLP whose batch is open, so that each rank or device binds its
                                   own share of it; with `wide`, also OUT/wide.onnx (1.2 MB of
                                   gradients: several buckets, backward work after the first)
  train_digits.py same A B         exit 0 when the initializers of the models A and B (trained
                                   parameters) agree within 1e-6 of each tensor's largest value
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def mlp(rng, name, widths, bounds):
    """Gemm and Relu layers of the given widths (64 inputs, 10 logits), uniform weights."""
    init, nodes, x = [], [], "x"
    for k, (n_in, n_out, bound) in enumerate(zip(widths[:-1], widths[1:], bounds)):
        w, b = f"w{k + 1}", f"b{k + 1}"
        init += [numpy_helper.from_array(rng.uniform(-bound, bound, (n_in, n_out)).astype(np.float32), w),
                 numpy_helper.from_array(rng.uniform(-bound, bound, (n_out,)).astype(np.float32), b)]
        last = k == len(bounds) - 1
        h = "logits" if last else ("h" if k == 0 else f"h{k + 1}")
        nodes.append(helper.make_node("Gemm", [x, w, b], [h]))
        if not last:
            x = "a" if k == 0 else f"a{k + 1}"
            nodes.append(helper.make_node("Relu", [h], [x]))
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def make(out, wide):
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    p = np.random.RandomState(0).permutation(len(x))
    np.save(out + "/x.npy", x[p][:384])
    np.save(out + "/y.npy", y[p][:384])
    r = np.random.RandomState(1)
    onnx.save(mlp(r, "digits_mlp", [64, 32, 10], [0.125, 0.17]), out + "/mlp.onnx")
    if wide:
        onnx.save(mlp(r, "digits_wide", [64, 512, 512, 10], [0.125, 0.044, 0.044]), out + "/wide.onnx")
    return 0


def same(a_path, b_path):
    a, b = ({i.name: numpy_helper.to_array(i).astype(np.float64) for i in onnx.load(p).graph.initializer}
            for p in (a_path, b_path))
    worst = max(np.abs(a[k] - b[k]).max() / np.abs(b[k]).max() for k in b)
    print("largest relative difference %.3g" % worst)
    return 0 if worst <= 1e-6 else 1


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "make":
        sys.exit(make(sys.argv[2], sys.argv[3:] == ["wide"]))
    if len(sys.argv) == 4 and sys.argv[1] == "same":
        sys.exit(same(sys.argv[2], sys.argv[3]))
    sys.exit("usage: train_digits.py make OUT [wide] | same A.onnx B.onnx")
