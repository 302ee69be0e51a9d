"""A model called from several threads gives each call its own result and leaks nothing; an
exception between an upload and its bookkeeping (a KeyboardInterrupt) frees the block."""

import threading
import unittest

import numpy as np

import clrun
from clrun import _lib
from support import GraphFiles

# Two inputs, so that a call's uploads and another's can interleave.
PAIR = """graph pair
input x: f32[64, 64]
input w: f32[64, 64]
node m: f32[64, 64] = matmul(x, w)
node y: f32[64, 64] = relu(m)
output y
"""


class Threads(GraphFiles):
    def setUp(self):
        super().setUp()
        self.ctx = clrun.Context()
        self.addCleanup(self.ctx.close)

    def test_calls_from_four_threads_each_get_their_own_result(self):
        model = self.ctx.load(self.graph(PAIR))
        rng = np.random.default_rng(3)
        cases = [(rng.standard_normal((64, 64)).astype(np.float32),
                  rng.standard_normal((64, 64)).astype(np.float32)) for _ in range(8)]
        want = [model(x=x, w=w)["y"] for x, w in cases]  # one at a time
        resident = self.ctx.memory_stats()["in_use"]  # constants and the last run's output
        wrong, failures = [], []

        def work(t):
            try:
                for k in range(50):
                    c = (t * 50 + k) % len(cases)
                    x, w = cases[c]
                    if not np.array_equal(model(x=x, w=w)["y"], want[c]):
                        wrong.append(c)
            except Exception as e:  # reported below, not lost in the thread
                failures.append(e)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(failures, [])
        self.assertEqual(len(wrong), 0, "%d of 200 calls gave another call's result" % len(wrong))
        self.assertEqual(self.ctx.memory_stats()["in_use"], resident)

    def test_a_scalar_input_in_every_form(self):
        model = self.ctx.load(self.graph("""graph scaled
input s: f32[]
input x: f32[4]
node y: f32[4] = mul(x, s)
output y
"""))
        self.assertEqual(model.inputs[0].shape, ())
        x = np.arange(4, dtype=np.float32)
        for s in (np.float32(2), np.array(2, np.float32), 2.0, np.float64(2), [2.0][0],
                  self.ctx.array(np.float32(2))):
            np.testing.assert_array_equal(model(s=s, x=x)["y"], x * 2)
        self.assertEqual(self.ctx.array(np.float32(3)).shape, ())
        self.assertEqual(self.ctx.array(np.float32(3)).numpy().shape, ())


class Interrupted(GraphFiles):
    """A KeyboardInterrupt arriving just after the library allocated a block."""

    def setUp(self):
        super().setUp()
        self.ctx = clrun.Context()
        self.addCleanup(self.ctx.close)
        real = _lib.alloc_ex
        self.interrupt = False

        def alloc_then_interrupt(*args):
            status = real(*args)
            if self.interrupt:
                raise KeyboardInterrupt
            return status

        _lib.alloc_ex = alloc_then_interrupt
        self.addCleanup(setattr, _lib, "alloc_ex", real)

    def test_an_interrupted_upload_for_a_run_is_freed(self):
        model = self.ctx.load(self.graph(PAIR))
        resident = self.ctx.memory_stats()["in_use"]
        self.interrupt = True
        with self.assertRaises(KeyboardInterrupt):
            model(x=np.ones((64, 64), np.float32), w=np.ones((64, 64), np.float32))
        self.assertEqual(self.ctx.memory_stats()["in_use"], resident)

    def test_an_interrupted_array_upload_is_freed(self):
        self.interrupt = True
        with self.assertRaises(KeyboardInterrupt):
            self.ctx.array(np.ones(1000, np.float32))
        self.assertEqual(self.ctx.memory_stats()["in_use"], 0)


if __name__ == "__main__":
    unittest.main()
