"""clrun.Pipeline: a model split over two devices (POCL's "pthread pthread", which run.sh sets)
gives the bits one device gives, each stage within its limit and the report of the split, also
with micro-batches streamed through the stages; bad devices, limits, options and inputs are
refused naming the argument."""

import unittest

import numpy as np

import clrun
from support import example

LIMIT = 2 << 20  # 2 MiB each: mlp.graph's 2.55 MiB of weights need both devices


class PipelineTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if len(clrun.devices()) < 2:
            raise unittest.SkipTest("the pipeline needs two devices (POCL_DEVICES='pthread pthread')")
        cls.path = example("mlp.graph")
        cls.x = np.random.default_rng(5).standard_normal((64, 784)).astype(np.float32)
        with clrun.Context() as ctx:
            cls.want = ctx.load(cls.path, donate=[]).run(x=cls.x)

    def test_two_devices_give_one_devices_bits(self):
        with clrun.Pipeline(self.path, [0, 1], limits="2M") as p:
            self.assertEqual([i.name for i in p.inputs], ["x"])
            for _ in range(2):
                got = p.run(x=self.x)
                self.assertEqual(set(got), set(self.want))
                for name, value in self.want.items():
                    self.assertEqual(got[name].tobytes(), value.tobytes(), name)
            stages = p.stages
            self.assertEqual([(s.device, s.first_node, s.end_node) for s in stages], [(0, 0, 1), (1, 1, 6)])
            self.assertEqual(stages[0].bytes_out, 128 << 10)
            self.assertEqual(stages[1].bytes_in, 128 << 10)
            for s in stages:
                self.assertEqual(s.limit_bytes, LIMIT)
                self.assertLessEqual(s.peak_bytes, LIMIT)
                self.assertGreater(s.weights_bytes, 0)
                self.assertGreater(s.wall_ms, 0)

    def test_limits_per_device_and_dict_feeds(self):
        with clrun.Pipeline(self.path, [0, 1], limits=[LIMIT, "2MiB"]) as p:
            got = p.run({"x": self.x})
            self.assertEqual(got["y"].tobytes(), self.want["y"].tobytes())
        # 0 (or None) is the context's own limit (CLRUN_POOL_LIMIT, else the device's memory)
        with clrun.Pipeline(self.path, [0, 1], limits=[0, None]) as p:
            self.assertTrue(all(s.limit_bytes > LIMIT for s in p.stages), p.stages)
            self.assertEqual(p.run(x=self.x)["y"].tobytes(), self.want["y"].tobytes())

    def test_refusals(self):
        with self.assertRaisesRegex(clrun.OutOfMemoryError, "no cut"):
            clrun.Pipeline(self.path, [0, 1], limits="1M")
        with self.assertRaisesRegex(clrun.NoDeviceError, "device 7"):
            clrun.Pipeline(self.path, [0, 7])
        with self.assertRaises(clrun.InvalidArgumentError):
            clrun.Pipeline(self.path, [])
        with self.assertRaises(clrun.InvalidArgumentError):
            clrun.Pipeline(self.path, [0, 1], limits=[LIMIT])
        with self.assertRaises(TypeError):
            clrun.Pipeline(self.path, "0,1")
        with self.assertRaisesRegex(TypeError, "limits"):
            clrun.Pipeline(self.path, [0, 1], limits=1.5)
        with self.assertRaisesRegex(TypeError, "allocator"):
            clrun.Pipeline(self.path, [0, 1], allocator=5)
        with self.assertRaisesRegex(TypeError, "plan_time_limit"):
            clrun.Pipeline(self.path, [0, 1], plan_time_limit="x")
        with clrun.Pipeline(self.path, [0, 1], limits=LIMIT) as p:
            with self.assertRaisesRegex(clrun.InvalidArgumentError, "no input named 'z'"):
                p.run(x=self.x, z=self.x)
            with self.assertRaisesRegex(clrun.InvalidArgumentError, "input 'x' has shape"):
                p.run(x=self.x[:32])
            with self.assertRaisesRegex(clrun.InvalidArgumentError, "input 'x' is not given"):
                p.run()
            with self.assertRaises(TypeError):
                p.run(x=self.x.astype(np.int32))
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "closed"):
            p.run(x=self.x)
        self.assertIn("closed", repr(p))

    def test_micro_batches_stream_with_the_bits_of_each_alone(self):
        rng = np.random.default_rng(9)
        with clrun.Context() as ctx:
            model = ctx.load(self.path, donate=[])
            for m in (1, 3):
                xs = rng.standard_normal((m, 64, 784)).astype(np.float32)
                want = [model.run(x=xs[j])["y"] for j in range(m)]
                with clrun.Pipeline(self.path, [0, 1], limits=LIMIT) as p:
                    got = p.run(x=xs, micro_batches=m)
                    self.assertEqual(got["y"].shape, (m,) + want[0].shape)
                    for j in range(m):
                        self.assertEqual(got["y"][j].tobytes(), want[j].tobytes(), j)
                    run = p.last_run
                    self.assertIsInstance(run, clrun.RunInfo)
                    self.assertEqual((run.micro_batches, run.slots, run.threads), (m, 2, 0 if m == 1 else 2))
                    self.assertEqual(run.bytes_moved, 128 << 10)
                    self.assertEqual(run.handoff_bytes, 2 * (128 << 10))
                    self.assertTrue(0 <= run.bubble_fraction < 1, run)
                    self.assertAlmostEqual(run.busy_ms, sum(s.wall_ms for s in p.stages), places=6)
                    with self.assertRaisesRegex(clrun.InvalidArgumentError, "leading axis of 2"):
                        p.run(x=xs[0], micro_batches=2)
                    with self.assertRaisesRegex(clrun.InvalidArgumentError, "micro_batches: 0"):
                        p.run(x=xs, micro_batches=0)
                    with self.assertRaisesRegex(TypeError, "micro_batches"):
                        p.run(x=xs, micro_batches=1.5)


if __name__ == "__main__":
    unittest.main()
