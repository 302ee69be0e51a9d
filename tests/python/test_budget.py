"""A memory budget from Python (load(memory_budget=...), the executor's memory_budget): a graph
whose skip tensor is alive across its peak fits a budget below what it holds as given, by
recomputing that tensor after the peak, with the same outputs bit for bit; a budget nothing
meets raises OutOfMemoryError naming the least, and a bad size is refused."""

import os
import unittest

import numpy as np

import clrun
from support import GraphFiles

SKIP = os.path.join(os.environ.get("CLRUN_SRCDIR", "."), "tests", "data", "graphs", "skip.graph")


class Budget(GraphFiles):
    def setUp(self):
        super().setUp()
        self.ctx = clrun.Context()
        self.addCleanup(self.ctx.close)
        self.path_ = SKIP
        self.x = np.random.default_rng(3).uniform(-1, 1, (64, 256)).astype(np.float32)

    def context_at_rate(self, rate):
        """A context whose CLRUN_OFFLOAD_RATE is rate (read when a context is created)."""
        kept = os.environ.get("CLRUN_OFFLOAD_RATE")
        os.environ["CLRUN_OFFLOAD_RATE"] = rate
        try:
            ctx = clrun.Context()
        finally:
            if kept is None:
                del os.environ["CLRUN_OFFLOAD_RATE"]
            else:
                os.environ["CLRUN_OFFLOAD_RATE"] = kept
        self.addCleanup(ctx.close)
        return ctx

    def test_a_budget_below_what_it_holds_recomputes_with_the_same_bits(self):
        ctx = self.context_at_rate("1e30")  # recomputing is all but free: no offload
        plain = ctx.load(self.path_, mode="planned")
        want = plain(x=self.x)["y"]
        given = plain.stats()["constant_bytes"] + plain.stats()["arena_bytes"]
        plain.close()
        tight = ctx.load(self.path_, memory_budget=given - 1)
        got = tight(x=self.x)["y"]
        stats = tight.stats()
        self.assertEqual(stats["mode"], "planned")
        self.assertEqual(stats["budget_bytes"], given - 1)
        self.assertLessEqual(stats["held_bytes"], given - 1)
        self.assertGreaterEqual(stats["recomputed_tensors"], 1)
        self.assertEqual(got.tobytes(), want.tobytes())
        tight.close()

    def test_a_budget_met_by_offload_keeps_the_bits_and_says_what_moved(self):
        plain = self.ctx.load(self.path_, mode="planned")
        want = plain(x=self.x)["y"]
        given = plain.stats()["constant_bytes"] + plain.stats()["arena_bytes"]
        plain.close()
        ctx = self.context_at_rate("0")  # moving bytes is free: offload what is dropped
        tight = ctx.load(self.path_, memory_budget=given - 1)
        got = tight(x=self.x)["y"]
        stats = tight.stats()
        self.assertLessEqual(stats["held_bytes"], given - 1)
        self.assertGreaterEqual(stats["offloaded_tensors"], 1)
        self.assertEqual(stats["recomputed_tensors"], 0)
        self.assertEqual(stats["offloaded_bytes"], 2 * stats["host_bytes"])
        self.assertIn("s", stats["offloaded"])
        self.assertEqual(got.tobytes(), want.tobytes())
        tight.close()

    def test_a_budget_nothing_meets_is_refused_with_the_least(self):
        with self.assertRaises(clrun.OutOfMemoryError) as caught:
            self.ctx.load(self.path_, memory_budget="64K")
        self.assertIn("at best", str(caught.exception))
        self.assertIn("its constants", str(caught.exception))

    def test_a_bad_size_is_refused(self):
        for bad in ("lots", 0, -5):
            with self.assertRaises((clrun.InvalidArgumentError, ValueError, TypeError)):
                self.ctx.load(self.path_, memory_budget=bad)


if __name__ == "__main__":
    unittest.main()
