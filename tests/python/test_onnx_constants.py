"""ONNX inputs fixed at load from Python (constants=, the library's `constants` option): an If
whose condition they settle takes its branch at load, the input is no longer fed (without them the
If branches at run time, with the same results), and bad values are refused with Python errors."""

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


def branchy_model():
    """y = If(sr > 8000) then x * 2 else -x."""
    f = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [3])
    high = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t"])], "high", [], [f("t")],
                             [helper.make_tensor("two", TensorProto.FLOAT, [1], [2.0])])
    low = helper.make_graph([helper.make_node("Neg", ["x"], ["n"])], "low", [], [f("n")])
    g = helper.make_graph([helper.make_node("Greater", ["sr", "th"], ["c"]),
                           helper.make_node("If", ["c"], ["y"], then_branch=high, else_branch=low)],
                          "branchy", [f("x"), helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
                          [f("y")], [helper.make_tensor("th", TensorProto.INT64, [], [8000])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


@unittest.skipIf(onnx is None, "no onnx module to build the model")
@unittest.skipIf(_lib.graph_load_onnx is None, "this libclrun has no ONNX import")
class Constants(GraphFiles):
    def setUp(self):
        super().setUp()
        self.ctx = clrun.Context()
        self.addCleanup(self.ctx.close)
        self.model = branchy_model()
        self.x = np.array([1, -2, 3], np.float32)

    def test_a_constant_settles_an_if_at_load(self):
        for sr, expected in ((16000, [2, -4, 6]), (np.int64(8000), [-1, 2, -3]),
                             (np.array(9000, np.int64), [2, -4, 6])):
            model = self.ctx.load(self.model, constants={"sr": sr})
            self.assertEqual([i.name for i in model.inputs], ["x"])  # sr is no longer fed
            self.assertEqual(model(x=self.x)["y"].tolist(), expected)

    def test_without_it_the_if_branches_at_run_time(self):
        model = self.ctx.load(self.model)
        self.assertEqual(sorted(i.name for i in model.inputs), ["sr", "x"])
        for sr, expected in ((3, [-1, 2, -3]), (16000, [2, -4, 6]), (8000, [-1, 2, -3])):
            self.assertEqual(model(x=self.x, sr=np.array(sr, np.int64))["y"].tolist(), expected)

    def test_bad_values_are_refused(self):
        with self.assertRaises(TypeError):
            self.ctx.load(self.model, constants={"sr": "high"})
        with self.assertRaises(TypeError):
            self.ctx.load(self.model, constants=[("sr", 1)])
        with self.assertRaises(clrun.InvalidArgumentError):  # no int64 holds it exactly
            self.ctx.load(self.model, constants={"sr": 16000.5})(x=self.x)
        with self.assertRaises(clrun.InvalidArgumentError):  # not an input of the model
            self.ctx.load(self.model, constants={"rate": 1})(x=self.x)
        with self.assertRaises(clrun.InvalidArgumentError):  # .graph files have no constants
            self.ctx.load(self.graph("graph g\ninput x: f32[2]\nnode y: f32[2] = neg(x)\noutput y\n"),
                          constants={"x": np.zeros(2, np.float32)})


if __name__ == "__main__":
    unittest.main()
