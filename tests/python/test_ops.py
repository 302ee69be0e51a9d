"""A few ops run from Python against numpy references (float64, the tolerance of docs/ops.md:
|d - r| <= 1e-5 (|r| + s), s the sum of the absolute values of the terms; exact for layout,
integer and sign ops)."""

import unittest

import numpy as np

import clrun
from support import GraphFiles

TOL = 1e-5


def graph_text(inputs, node, out_type):
    """A graph of one node over f32/i32 inputs [(name, type)], its output called y."""
    lines = ["graph op"]
    lines += ["input %s: %s" % (name, type_) for name, type_ in inputs]
    lines += ["node y: %s = %s" % (out_type, node), "output y"]
    return "\n".join(lines) + "\n"


class Ops(GraphFiles):
    @classmethod
    def setUpClass(cls):
        cls.ctx = clrun.Context()

    @classmethod
    def tearDownClass(cls):
        cls.ctx.close()

    def setUp(self):
        super().setUp()
        self.rng = np.random.default_rng(11)

    def run_op(self, inputs, node, out_type, values):
        model = self.ctx.load(self.graph(graph_text(inputs, node, out_type)))
        try:
            return model(values)["y"]
        finally:
            model.close()

    def normal(self, *shape):
        return self.rng.standard_normal(shape).astype(np.float32)

    def assert_close(self, got, want, scale):
        want = np.asarray(want, np.float64)
        self.assertEqual(got.shape, want.shape)
        bound = TOL * (np.abs(want) + scale)
        worst = np.max(np.abs(got.astype(np.float64) - want) - bound)
        self.assertLessEqual(worst, 0, "off by more than the tolerance")

    def test_add_broadcasts_like_numpy(self):
        a, b = self.normal(4, 1, 6), self.normal(3, 1)
        got = self.run_op([("a", "f32[4, 1, 6]"), ("b", "f32[3, 1]")], "add(a, b)",
                          "f32[4, 3, 6]", {"a": a, "b": b})
        self.assertEqual(got.tobytes(), (a + b).tobytes())  # one rounding: exact in f32

    def test_integer_mul_is_exact(self):
        a = self.rng.integers(-1000, 1000, (5, 7)).astype(np.int32)
        b = self.rng.integers(-1000, 1000, (7,)).astype(np.int32)
        got = self.run_op([("a", "i32[5, 7]"), ("b", "i32[7]")], "mul(a, b)", "i32[5, 7]",
                          {"a": a, "b": b})
        np.testing.assert_array_equal(got, a * b)

    def test_relu_and_neg_are_exact(self):
        x = self.normal(64)
        got = self.run_op([("x", "f32[64]")], "relu(x)", "f32[64]", {"x": x})
        np.testing.assert_array_equal(got, np.maximum(x, 0))
        got = self.run_op([("x", "f32[64]")], "neg(x)", "f32[64]", {"x": x})
        np.testing.assert_array_equal(got, -x)

    def test_matmul_with_bias_and_transpose(self):
        a, b, bias = self.normal(2, 9, 33), self.normal(17, 33), self.normal(17)
        got = self.run_op([("a", "f32[2, 9, 33]"), ("b", "f32[17, 33]"), ("c", "f32[17]")],
                          "matmul(a, b, c) transpose_b=1", "f32[2, 9, 17]",
                          {"a": a, "b": b, "c": bias})
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        want = a64 @ b64.T + bias
        scale = np.abs(a64) @ np.abs(b64).T + np.abs(bias)
        self.assert_close(got, want, scale)

    def test_softmax_rows_and_causal_mask(self):
        x = self.normal(3, 5, 5) * 4
        got = self.run_op([("x", "f32[3, 5, 5]")], "softmax(x) causal=1", "f32[3, 5, 5]", {"x": x})
        masked = np.where(np.tril(np.ones((5, 5), bool)), x.astype(np.float64), -np.inf)
        e = np.exp(masked - masked.max(axis=-1, keepdims=True))
        want = e / e.sum(axis=-1, keepdims=True)
        self.assert_close(got, want, 0)
        self.assertTrue(np.all(got[:, np.triu_indices(5, 1)[0], np.triu_indices(5, 1)[1]] == 0))

    def test_layernorm(self):
        x, g, b = self.normal(6, 48), self.normal(48), self.normal(48)
        got = self.run_op([("x", "f32[6, 48]"), ("g", "f32[48]"), ("b", "f32[48]")],
                          "layernorm(x, g, b) eps=1e-5", "f32[6, 48]", {"x": x, "g": g, "b": b})
        x64 = x.astype(np.float64)
        mean = x64.mean(-1, keepdims=True)
        var = ((x64 - mean) ** 2).mean(-1, keepdims=True)
        normed = (x64 - mean) / np.sqrt(var + 1e-5)
        want = normed * g + b
        scale = np.abs(normed * g) + np.abs(b) + np.abs(x64).sum(-1, keepdims=True)
        self.assert_close(got, want, scale)

    def test_reduce_sum_over_axes(self):
        x = self.normal(4, 5, 6)
        got = self.run_op([("x", "f32[4, 5, 6]")], "reduce_sum(x) axes=[0, 2] keepdims=1",
                          "f32[1, 5, 1]", {"x": x})
        x64 = x.astype(np.float64)
        self.assert_close(got, x64.sum((0, 2), keepdims=True), np.abs(x64).sum((0, 2), keepdims=True))

    def test_layout_ops_are_exact(self):
        x = self.rng.integers(-50, 50, (2, 3, 4)).astype(np.int32)
        got = self.run_op([("x", "i32[2, 3, 4]")], "transpose(x) perm=[2, 0, 1]", "i32[4, 2, 3]",
                          {"x": x})
        np.testing.assert_array_equal(got, x.transpose(2, 0, 1))
        got = self.run_op([("x", "i32[2, 3, 4]")], "slice(x) axis=2 start=1 end=3", "i32[2, 3, 2]",
                          {"x": x})
        np.testing.assert_array_equal(got, x[:, :, 1:3])
        got = self.run_op([("x", "i32[2, 3, 4]")], "reshape(x) shape=[6, -1]", "i32[6, 4]",
                          {"x": x})
        np.testing.assert_array_equal(got, x.reshape(6, -1))

    def test_gather_rows(self):
        table = self.normal(10, 4)
        idx = np.array([[3, 0], [9, 3]], np.int32)
        got = self.run_op([("t", "f32[10, 4]"), ("i", "i32[2, 2]")], "gather(t, i)", "f32[2, 2, 4]",
                          {"t": table, "i": idx})
        np.testing.assert_array_equal(got, table[idx])


if __name__ == "__main__":
    unittest.main()
