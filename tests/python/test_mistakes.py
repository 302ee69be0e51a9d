"""Python mistakes get Python answers: TypeErrors naming what was expected, sizes as the
environment takes them, unused donations as warnings (errors with strict_donation=True), and
profile_spans() refusing as trace() does."""

import unittest
import warnings

import numpy as np

import clrun
from support import GraphFiles

CHAIN = """graph chain
input x: f32[4, 8]
const k: f32[4, 8] uniform(-1, 1) seed=7
node a: f32[4, 8] = add(x, k)
node y: f32[4, 8] = relu(a)
output y
"""

# x is donated but only a matmul reads it: no output can take its block.
UNUSED = """graph unused
input x: f32[8, 8] donated
const w: f32[8, 8] uniform(-1, 1) seed=1
node y: f32[8, 8] = matmul(x, w)
output y
"""


class Mistakes(GraphFiles):
    def setUp(self):
        super().setUp()
        self.ctx = clrun.Context()
        self.addCleanup(self.ctx.close)

    def test_a_positional_array_is_a_type_error_naming_the_inputs(self):
        model = self.ctx.load(self.graph(CHAIN))
        with self.assertRaisesRegex(TypeError, r"by name: model\(x=\.\.\.\)"):
            model(np.ones((4, 8), np.float32))
        with self.assertRaisesRegex(TypeError, "by name"):
            model.run([np.ones((4, 8), np.float32)])
        np.testing.assert_array_equal(model({"x": np.zeros((4, 8), np.float32)})["y"],
                                      model(x=np.zeros((4, 8), np.float32))["y"])

    def test_an_array_of_another_kind_is_refused_naming_both_dtypes(self):
        model = self.ctx.load(self.graph(CHAIN))
        for dtype in (np.int32, np.int64, np.bool_):
            with self.assertRaisesRegex(TypeError, "input 'x': needs float32 values, got %s"
                                        % np.dtype(dtype)) as caught:
                model(x=np.ones((4, 8), dtype))
            self.assertIsInstance(caught.exception, clrun.InvalidArgumentError)
        with self.assertRaisesRegex(TypeError, "needs int32 values, got float32"):
            self.ctx.array(np.ones(3, np.float32), dtype=np.int32)
        # Within a kind, and Python numbers (which have no dtype of their own), convert.
        model(x=np.ones((4, 8), np.float64))
        model(x=[[1] * 8] * 4)
        self.assertEqual(self.ctx.memory_stats()["in_use"], model.stats()["constant_bytes"] +
                         4 * 8 * 4)

    def test_pool_limit_takes_the_environments_sizes(self):
        for text, size in (("64M", 64 << 20), ("1GiB", 1 << 30), ("4096", 4096), ("2k", 2048)):
            with clrun.Context(pool_limit=text) as ctx:
                self.assertEqual(ctx.memory_stats()["limit"], size)
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "'64Q' is not a size"):
            clrun.Context(pool_limit="64Q")
        with self.assertRaisesRegex(TypeError, "number of bytes"):
            clrun.Context(pool_limit=1.5)

    def test_a_size_past_64_bits_is_refused_not_wrapped(self):
        # ctypes keeps the low 64 bits: 2**64 + 4096 would be a limit of 4096, 2**64 none.
        path = self.graph(CHAIN)
        for size in (1 << 64, (1 << 64) + 4096, 1 << 70):
            with self.assertRaisesRegex(clrun.InvalidArgumentError, "pool_limit.*at most 2\\^64 - 1"):
                clrun.Context(pool_limit=size)
            with self.assertRaisesRegex(clrun.InvalidArgumentError, "memory_budget.*at most 2\\^64 - 1"):
                self.ctx.load(path, memory_budget=size)
        with clrun.Context(pool_limit=(1 << 64) - 1) as ctx:  # the largest: the device's memory
            self.assertGreater(ctx.memory_stats()["limit"], 1 << 20)

    def test_example_inputs_take_the_seeds_the_cli_takes(self):
        # clrun run --seed takes integers from 0 to 2^64 - 1: -1 must not wrap to 2^64 - 1,
        # nor 1.5 be cut to 1
        model = self.ctx.load(self.graph(CHAIN))
        for seed in (-1, 1 << 64):
            with self.assertRaisesRegex(clrun.InvalidArgumentError, "seed .*0 to 2\\^64 - 1"):
                model.example_inputs(seed)
        for seed in (1.5, "1", True):
            with self.assertRaisesRegex(TypeError, "seed is an int"):
                model.example_inputs(seed)
        np.testing.assert_array_equal(model.example_inputs(np.uint64((1 << 64) - 1))["x"],
                                      model.example_inputs((1 << 64) - 1)["x"])

    def test_an_unused_donation_warns_or_with_strict_donation_fails(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = self.ctx.load(self.graph(UNUSED))
        self.assertEqual([w.category for w in caught], [clrun.UnusedDonationWarning])
        self.assertIn("model 'unused' donates input 'x', which no output can take",
                      str(caught[0].message))
        self.assertEqual(caught[0].filename, __file__)  # points at the load
        self.assertEqual(model.stats()["unused_donated"], ["x"])
        resident = self.ctx.memory_stats()["in_use"]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.ctx.load(self.graph(UNUSED), donate=[])
            self.ctx.load(self.graph(CHAIN), donate=["x"])  # add can write y into x's block
        self.assertEqual(caught, [])
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "donates input 'x'.*strict"):
            self.ctx.load(self.graph(UNUSED), strict_donation=True)
        self.assertEqual(self.ctx.memory_stats()["in_use"], resident)  # nothing left behind

    def test_profile_spans_refuses_as_trace_does(self):
        model = self.ctx.load(self.graph(CHAIN))
        model(x=np.ones((4, 8), np.float32))
        for call in (model.profile_spans, lambda: model.trace(self.path("t.json"))):
            with self.assertRaisesRegex(clrun.InvalidArgumentError, "without profile=True"):
                call()
        profiled = self.ctx.load(self.graph(CHAIN), profile=True)
        for call in (profiled.profile_spans, lambda: profiled.trace(self.path("t.json"))):
            with self.assertRaisesRegex(clrun.InvalidArgumentError, "has not run yet"):
                call()
        profiled(x=np.ones((4, 8), np.float32))
        self.assertGreaterEqual(len(profiled.profile_spans()), 1)


if __name__ == "__main__":
    unittest.main()
