"""Empty tensors (a dimension 0) from Python: a model whose input x is [3, 0, 5] is fed an empty
numpy array, its empty intermediates fold, and its empty outputs come back as numpy arrays of
their shape, (3, 0, 5); the run takes no device memory for them. Against numpy, with fusion on
and off and in the three executor modes."""

import unittest

import numpy as np

import clrun
from clrun import _lib
from support import GraphFiles

try:
    import onnx
    from onnx import TensorProto, helper
except ImportError:  # the CLI tests cover the same with python3-onnx
    onnx = None


def empty_model():
    """r = relu(x); y = concat(r, h, 1); s = r.sum(1); e = r * 2."""
    f = lambda name, dims: helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]),
                           helper.make_node("Concat", ["r", "h"], ["y"], axis=1),
                           helper.make_node("ReduceSum", ["r"], ["s"], axes=[1], keepdims=0),
                           helper.make_node("Mul", ["r", "two"], ["e"])],
                          "empty", [f("x", [3, 0, 5]), f("h", [3, 2, 5])],
                          [f("y", [3, 2, 5]), f("s", [3, 5]), f("e", [3, 0, 5])],
                          [helper.make_tensor("two", TensorProto.FLOAT, [1], [2.0])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)]).SerializeToString()


@unittest.skipIf(onnx is None, "no onnx module to build the model")
@unittest.skipIf(_lib.graph_load_onnx is None, "this libclrun has no ONNX import")
class Empty(GraphFiles):
    def setUp(self):
        super().setUp()
        self.ctx = clrun.Context()
        self.addCleanup(self.ctx.close)
        self.x = np.zeros((3, 0, 5), np.float32)
        self.h = (np.arange(30, dtype=np.float32).reshape(3, 2, 5) - 7) / 3

    def test_empty_inputs_and_outputs_are_numpy_arrays_of_their_shape(self):
        for mode in ("pooled", "naive", "planned"):
            for fusion in (True, False):
                model = self.ctx.load(empty_model(), mode=mode, fusion=fusion)
                self.assertEqual([i.name for i in model.inputs], ["x", "h"])
                before = self.ctx.memory_stats()["in_use"]
                out = model(x=self.x, h=self.h)
                r = np.maximum(self.x, 0)
                np.testing.assert_array_equal(out["y"], np.concatenate([r, self.h], axis=1))
                np.testing.assert_array_equal(out["s"], r.sum(axis=1))
                self.assertEqual(out["e"].shape, (3, 0, 5))
                self.assertEqual(out["e"].dtype, np.float32)
                # what the run holds after it: y (120 bytes) in pooled and naive mode; nothing
                # for x and e
                held = self.ctx.memory_stats()["in_use"] - before
                self.assertEqual(held, 0 if mode == "planned" else 120, (mode, fusion))
                model.close()

    def test_an_empty_input_of_the_wrong_shape_is_refused(self):
        model = self.ctx.load(empty_model())
        with self.assertRaises(clrun.InvalidArgumentError):
            model(x=np.zeros((3, 1, 5), np.float32), h=self.h)


if __name__ == "__main__":
    unittest.main()
