"""No leak of device memory: 1,000 load/run/free cycles leave the pool's statistics at zero and
the context's OpenCL reference count (held by every cl_mem, queue and program) unchanged."""

import gc
import unittest

import numpy as np

import clrun
from support import GraphFiles, cl_reference_count

# Weights, an in-place chain, a donated input and two outputs.
SMALL = """graph small
input x: f32[8, 32] donated
input s: f32[8, 16]
const w: f32[32, 16] normal(0, 0.1) seed=9
const b: f32[16] uniform(-1, 1) seed=10
node h: f32[8, 16] = matmul(x, w, b)
node r: f32[8, 16] = relu(h)
node y: f32[8, 16] = add(r, s)
node z: f32[8, 16] = neg(y)
output y
output z
"""

CYCLES = 1000


class NoLeak(GraphFiles):
    def setUp(self):
        super().setUp()
        self.path_ = self.graph(SMALL)
        self.x = np.random.default_rng(3).standard_normal((8, 32)).astype(np.float32)
        self.s = np.ones((8, 16), np.float32)

    def cycle(self, ctx, i):
        """One load/run/free, varying how: modes, numpy or device inputs, explicit close or
        garbage collection."""
        mode = ("pooled", "planned", "naive")[i % 3]
        model = ctx.load(self.path_, mode=mode, plan_time_limit=0.01)
        if i % 2:
            out = model(x=self.x, s=self.s)
        else:
            x, s = ctx.array(self.x), ctx.array(self.s)
            out = model(x=x, s=s)
            s.free()
        if i % 4 < 2:
            model.close()
        return out

    def settled(self, ctx):
        gc.collect()
        ctx.trim()
        return ctx.memory_stats(), cl_reference_count(ctx)

    def test_a_thousand_cycles_leave_nothing(self):
        with clrun.Context() as ctx:
            first = self.cycle(ctx, 0)  # builds the kernels and starts the pool
            stats, references = self.settled(ctx)
            self.assertEqual(stats["in_use"], 0)
            for i in range(1, CYCLES + 1):
                out = self.cycle(ctx, i)
                self.assertEqual(out["y"].tobytes(), first["y"].tobytes())
            after, references_after = self.settled(ctx)
            self.assertEqual(after["in_use"], 0)
            self.assertEqual(after["reserved"], 0)
            self.assertEqual(after["chunks"], 0)
            self.assertEqual(after["alloc_count"] - stats["alloc_count"],
                             after["free_count"] - stats["free_count"])
            self.assertGreater(after["alloc_count"] - stats["alloc_count"], 4 * CYCLES)
            self.assertEqual(references_after, references)

    def test_closing_a_context_with_live_children_releases_everything(self):
        for _ in range(20):
            ctx = clrun.Context()
            model = ctx.load(self.path_)
            kept = ctx.array(self.s)
            model(x=ctx.array(self.x), s=kept)
            ctx.close()  # model and array still referenced here
            self.assertTrue(ctx.closed)
            del model, kept
        gc.collect()


if __name__ == "__main__":
    unittest.main()
