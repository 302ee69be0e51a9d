"""ONNX models from Python: dims= and shapes= passed to the library, symbolic dimensions taken
from the fed arrays (one executor per binding), conflicts refused, models loaded from bytes."""

import unittest

import numpy as np

import clrun
from clrun import _lib
from support import (GraphFiles, ONNX_FLOAT, onnx_model, onnx_node, onnx_value)

# y = a + b, both [batch, 4]; z = relu(y)
ADD = onnx_model([onnx_node("Add", ["a", "b"], ["y"]), onnx_node("Relu", ["y"], ["z"])],
                 [onnx_value("a", ONNX_FLOAT, ["batch", 4]),
                  onnx_value("b", ONNX_FLOAT, ["batch", 4])],
                 [onnx_value("z", ONNX_FLOAT, ["batch", 4])], name="add")


@unittest.skipIf(_lib.graph_load_onnx is None, "this libclrun has no ONNX import")
class SymbolicDims(GraphFiles):
    def setUp(self):
        super().setUp()
        self.ctx = clrun.Context()
        self.addCleanup(self.ctx.close)
        self.onnx = self.path("add.onnx")
        with open(self.onnx, "wb") as out:
            out.write(ADD)

    def feed(self, batch, seed=0):
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((batch, 4)).astype(np.float32)
        b = rng.standard_normal((batch, 4)).astype(np.float32)
        return a, b, np.maximum(a + b, 0)

    def test_dims_are_passed_to_the_library(self):
        model = self.ctx.load(self.onnx, dims={"batch": 3})
        self.assertEqual([i.shape for i in model.inputs], [(3, 4), (3, 4)])
        self.assertEqual(model.outputs[0].shape, (3, 4))
        a, b, want = self.feed(3)
        np.testing.assert_array_equal(model(a=a, b=b)["z"], want)
        with self.assertRaisesRegex(clrun.InvalidArgumentError, r"shape \(3, 4\), \(2, 4\)"):
            model(a=a[:2], b=b[:2])

    def test_shapes_are_passed_to_the_library(self):
        model = self.ctx.load(self.onnx, shapes={"a": (5, 4), "b": [5, 4]})
        self.assertEqual([i.shape for i in model.inputs], [(5, 4), (5, 4)])
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "which the model fixes at 4"):
            self.ctx.load(self.onnx, shapes={"a": (5, 3), "b": (5, 3)})

    def test_a_typo_in_dims_is_the_librarys_error(self):
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "dimension 'bacth'"):
            self.ctx.load(self.onnx, dims={"batch": 2, "bacth": 2})
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "int >= 1"):
            self.ctx.load(self.onnx, dims={"batch": 0})
        # refused at load even where the model then takes its batch from the arrays
        with self.assertRaisesRegex(clrun.InvalidArgumentError,
                                    "no input of the model has a dimension 'bacth'.*: batch"):
            self.ctx.load(self.onnx, dims={"bacth": 2})
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "no input 'c'"):
            self.ctx.load(self.onnx, shapes={"c": (2, 4)})

    def test_unbound_dims_are_taken_from_the_fed_arrays(self):
        model = self.ctx.load(self.onnx)
        self.assertEqual([i.shape for i in model.inputs], [("batch", 4), ("batch", 4)])
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "'batch'.*has not run yet"):
            model.stats()
        for batch in (2, 3, 2, 7):
            a, b, want = self.feed(batch, seed=batch)
            out = model(a=a, b=b)["z"]
            self.assertEqual(out.shape, (batch, 4))
            np.testing.assert_array_equal(out, want)
        self.assertEqual(len(model._state.executors), 3)  # one per distinct batch, kept
        self.assertEqual(model.stats()["steps"], model.stats()["steps"])  # the last run's
        device = self.ctx.array(self.feed(5)[0])
        np.testing.assert_array_equal(model(a=device, b=np.zeros((5, 4), np.float32))["z"],
                                      np.maximum(device.numpy(), 0))

    def test_conflicting_dims_are_refused(self):
        model = self.ctx.load(self.onnx)
        a, _, _ = self.feed(2)
        _, b, _ = self.feed(3)
        with self.assertRaisesRegex(clrun.InvalidArgumentError,
                                    "dimension 'batch' is 2 in input 'a' and 3 in input 'b'"):
            model(a=a, b=b)
        with self.assertRaisesRegex(clrun.InvalidArgumentError,
                                    r"input 'a' has shape \(batch, 4\)"):
            model(a=np.zeros((2, 5), np.float32), b=np.zeros((2, 5), np.float32))
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "has 2 dimensions"):
            model(a=np.zeros(4, np.float32), b=np.zeros(4, np.float32))
        self.assertEqual(len(model._state.executors), 0)
        self.assertEqual(self.ctx.memory_stats()["in_use"], 0)

    def test_unknown_dims_and_shapes_are_taken_from_the_fed_arrays(self):
        model = self.ctx.load(onnx_model(
            [onnx_node("Relu", ["x"], ["y"]), onnx_node("Neg", ["u"], ["v"])],
            [onnx_value("x", ONNX_FLOAT, None), onnx_value("u", ONNX_FLOAT, [None, 2])],
            [onnx_value("y", ONNX_FLOAT, None), onnx_value("v", ONNX_FLOAT, [None, 2])]))
        self.assertEqual([i.shape for i in model.inputs], [None, (None, 2)])
        for shape in ((2, 3), (5,), (2, 3)):
            x = np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32).reshape(shape)
            u = np.ones((shape[0], 2), np.float32)
            out = model(x=x, u=u)
            np.testing.assert_array_equal(out["y"], np.maximum(x, 0))
            np.testing.assert_array_equal(out["v"], -u)
        self.assertEqual(len(model._state.executors), 2)

    def test_a_model_loads_from_bytes(self):
        for data in (ADD, bytearray(ADD), memoryview(ADD)):
            model = self.ctx.load(data, dims={"batch": 2})
            a, b, want = self.feed(2)
            np.testing.assert_array_equal(model(a=a, b=b)["z"], want)
        model = self.ctx.load(ADD)  # and takes its batch from what it is fed
        a, b, want = self.feed(4)
        np.testing.assert_array_equal(model(a=a, b=b)["z"], want)
        with self.assertRaises(clrun.ParseError):
            self.ctx.load(b"\x08\x08\x3a\x03abc")
        with self.assertRaisesRegex(TypeError, "a path or the bytes"):
            self.ctx.load(42)


if __name__ == "__main__":
    unittest.main()
