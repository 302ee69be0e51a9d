"""Donation: an input the model donates gives its device memory to the run (XLA's
donate_argnums); a donated device array used again raises the library's donation error."""

import unittest

import numpy as np

import clrun
from support import GraphFiles

# x is donated in the file; a = neg(x) may take x's block in place, y = relu(a) a's.
DONATED = """graph donated
input x: f32[16, 16] donated
node a: f32[16, 16] = neg(x)
node y: f32[16, 16] = relu(a)
output y
"""

KEPT = DONATED.replace("graph donated", "graph kept").replace("] donated", "]")


class Donation(GraphFiles):
    def setUp(self):
        super().setUp()
        self.ctx = clrun.Context()
        self.addCleanup(self.ctx.close)
        self.x = np.random.default_rng(5).standard_normal((16, 16)).astype(np.float32)
        self.want = np.maximum(-self.x, 0)

    def test_inputs_report_the_files_donation(self):
        self.assertTrue(self.ctx.load(self.graph(DONATED)).inputs[0].donated)
        self.assertFalse(self.ctx.load(self.graph(KEPT, "kept.graph")).inputs[0].donated)

    def test_donated_device_array_is_consumed_and_refused_again(self):
        model = self.ctx.load(self.graph(DONATED), fusion=False)  # the two nodes' donations
        device = self.ctx.array(self.x)
        np.testing.assert_array_equal(model(x=device)["y"], self.want)
        self.assertTrue(device.donated)
        self.assertEqual(model.stats()["donations"], 2)  # x's block went to a, then to y
        with self.assertRaises(clrun.DonatedError) as caught:
            model(x=device)
        error = caught.exception
        self.assertEqual(error.name, "CLRUN_ERROR_DONATED")
        self.assertEqual(error.status, -17)
        self.assertIn("input 'x'", error.message)  # the library's message names the input
        self.assertIn("donated", error.message)
        self.assertIn(error.message, str(error))
        np.testing.assert_array_equal(model(x=self.x)["y"], self.want)  # the model still runs

    def test_a_donated_array_cannot_be_read_or_passed_elsewhere(self):
        model = self.ctx.load(self.graph(DONATED))
        other = self.ctx.load(self.graph(KEPT, "kept.graph"))
        device = self.ctx.array(self.x)
        model(x=device)
        for use in (device.numpy, lambda: other(x=device)):
            with self.assertRaises(clrun.DonatedError) as caught:
                use()
            # the library's message: whose input it was, and that the executor owns it now
            self.assertIn("donated to a run as input 'x' of graph 'donated'", caught.exception.message)
            self.assertEqual(caught.exception.name, "CLRUN_ERROR_DONATED")
        device.free()  # its memory is the model's: nothing is freed twice
        model.close()
        other.close()
        self.assertEqual(self.ctx.memory_stats()["in_use"], 0)

    def test_a_donated_array_stays_refused_after_its_block_has_a_new_owner(self):
        model = self.ctx.load(self.graph(DONATED))
        device = self.ctx.array(self.x)
        model(x=device)
        model.close()  # frees the block the run took
        fresh = [self.ctx.array(self.x) for _ in range(4)]  # the pool hands it out again
        with self.assertRaises(clrun.DonatedError):
            device.numpy()
        kept = self.ctx.load(self.graph(KEPT, "kept.graph"))
        with self.assertRaises(clrun.DonatedError):
            kept(x=device)
        np.testing.assert_array_equal(fresh[0].numpy(), self.x)

    def test_numpy_inputs_to_a_donated_model_stay_untouched(self):
        model = self.ctx.load(self.graph(DONATED))
        x = self.x.copy()
        for _ in range(3):
            np.testing.assert_array_equal(model(x=x)["y"], self.want)
        np.testing.assert_array_equal(x, self.x)
        model.close()
        self.assertEqual(self.ctx.memory_stats()["in_use"], 0)

    def test_donate_at_load_overrides_the_file(self):
        kept = self.ctx.load(self.graph(DONATED), donate=[])
        self.assertFalse(kept.inputs[0].donated)
        device = self.ctx.array(self.x)
        for _ in range(2):
            np.testing.assert_array_equal(kept(x=device)["y"], self.want)
        self.assertFalse(device.donated)
        np.testing.assert_array_equal(device.numpy(), self.x)  # a kept input is never written

        donating = self.ctx.load(self.graph(KEPT, "kept.graph"), donate=["x"])
        self.assertTrue(donating.inputs[0].donated)
        donating(x=device)
        self.assertTrue(device.donated)
        with self.assertRaises(clrun.DonatedError):
            donating(x=device)

    def test_donate_names_must_be_inputs(self):
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "no input 'a'"):
            self.ctx.load(self.graph(DONATED), donate=["a"])
        self.assertEqual(self.ctx.memory_stats()["in_use"], 0)

    def test_donation_lowers_the_peak(self):
        x = self.x
        donating = self.ctx.load(self.graph(DONATED))
        donating(x=self.ctx.array(x))
        kept = self.ctx.load(self.graph(DONATED), donate=[])
        kept(x=self.ctx.array(x))
        self.assertLess(donating.stats()["peak_bytes"], kept.stats()["peak_bytes"])


if __name__ == "__main__":
    unittest.main()
