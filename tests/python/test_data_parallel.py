"""clrun.DataParallel: the batch split over two devices (POCL's "pthread pthread", which run.sh
sets), 16 + 16 rows and 11 + 11 + 10 on devices 0, 1, 0, gives the bits one device gives at the
global batch, for an ONNX model whose batch is open (weights fixed by constants=, an input
without the batch dimension fed whole) and for a .graph file (its batch each device's share);
bad devices, batches and inputs are refused naming the problem."""

import unittest

import numpy as np

import clrun
from clrun import _lib
from support import GraphFiles, ONNX_FLOAT, example, onnx_model, onnx_node, onnx_value

# y = relu(x @ w + m): x [batch, 16] split, w [16, 8] fixed as a constant, m [8] fed whole
NET = onnx_model([onnx_node("MatMul", ["x", "w"], ["h"]), onnx_node("Add", ["h", "m"], ["s"]),
                  onnx_node("Relu", ["s"], ["y"])],
                 [onnx_value("x", ONNX_FLOAT, ["batch", 16]), onnx_value("w", ONNX_FLOAT, [16, 8]),
                  onnx_value("m", ONNX_FLOAT, [8])],
                 [onnx_value("y", ONNX_FLOAT, ["batch", 8])], name="net")


@unittest.skipIf(_lib.graph_load_onnx is None, "this libclrun has no ONNX import")
class DataParallelTest(GraphFiles):
    def setUp(self):
        super().setUp()
        if len(clrun.devices()) < 2:
            self.skipTest("data parallelism needs two devices (POCL_DEVICES='pthread pthread')")
        self.onnx = self.path("net.onnx")
        with open(self.onnx, "wb") as out:
            out.write(NET)
        rng = np.random.default_rng(4)
        self.w = rng.standard_normal((16, 8)).astype(np.float32)
        self.x = rng.standard_normal((32, 16)).astype(np.float32)
        self.m = rng.standard_normal(8).astype(np.float32)
        with clrun.Context() as ctx:
            model = ctx.load(self.onnx, dims={"batch": 32}, constants={"w": self.w})
            self.want = model(x=self.x, m=self.m)["y"]

    def test_onnx_shares_give_one_devices_bits(self):
        for devices, bind, rows in (([0, 1], {"dims": {"batch": 32}}, [16, 16]),
                                    ([0, 1, 0], {"shapes": {"x": (32, 16)}}, [11, 11, 10])):
            with clrun.DataParallel(self.onnx, devices, constants={"w": self.w}, **bind) as p:
                self.assertEqual(p.batch, 32)
                self.assertEqual([(i.name, i.shape) for i in p.inputs], [("x", (32, 16)), ("m", (8,))])
                self.assertEqual([(o.name, o.shape) for o in p.outputs], [("y", (32, 8))])
                for _ in range(2):
                    got = p.run(x=self.x, m=self.m)
                    self.assertEqual(got["y"].tobytes(), self.want.tobytes(), devices)
                shares = p.shares
                self.assertEqual([s.device for s in shares], devices)
                self.assertEqual([s.rows for s in shares], rows)
                self.assertEqual([s.first_row for s in shares], list(np.cumsum([0] + rows[:-1])))
                self.assertTrue(all(s.weights_bytes > 0 and s.wall_ms > 0 for s in shares), shares)
                self.assertGreater(p.wall_ms, 0)

    def test_modes_and_fusion(self):
        for allocator, fusion in (("planned", False), ("naive", True), ("buddy", None)):
            with clrun.DataParallel(self.onnx, [0, 1, 0], dims={"batch": 32}, constants={"w": self.w},
                                    allocator=allocator, fusion=fusion, plan_time_limit=0,
                                    pool_limit="64M") as p:
                got = p({"x": self.x, "m": self.m})
                self.assertEqual(got["y"].tobytes(), self.want.tobytes(), allocator)

    def test_graph_file_batch_is_each_share(self):
        path = example("mlp.graph")
        x = np.random.default_rng(6).standard_normal((128, 784)).astype(np.float32)
        with clrun.Context() as ctx:
            model = ctx.load(path, donate=[])
            want = np.concatenate([model(x=x[:64])["y"], model(x=x[64:])["y"]])
        with clrun.DataParallel(path, [0, 1]) as p:
            self.assertEqual(p.batch, 128)
            self.assertEqual(p.inputs[0].shape, (128, 784))
            self.assertEqual(p.run(x=x)["y"].tobytes(), want.tobytes())

    def test_refusals(self):
        with self.assertRaisesRegex(clrun.NoDeviceError, "device 7"):
            clrun.DataParallel(self.onnx, [0, 7], dims={"batch": 32}, constants={"w": self.w})
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "a batch of 1 rows is less than a row for each of the 2 shares"):
            clrun.DataParallel(self.onnx, [0, 1], dims={"batch": 1}, constants={"w": self.w})
        with self.assertRaises(clrun.InvalidArgumentError):
            clrun.DataParallel(self.onnx, [], dims={"batch": 32})
        with self.assertRaises(TypeError):
            clrun.DataParallel(self.onnx, "0,1")
        with self.assertRaisesRegex(TypeError, "fusion"):
            clrun.DataParallel(self.onnx, [0, 1], fusion=1)
        with clrun.DataParallel(self.onnx, [0, 1], dims={"batch": 32}, constants={"w": self.w}) as p:
            with self.assertRaisesRegex(clrun.InvalidArgumentError, "input 'x' has shape"):
                p.run(x=self.x[:16], m=self.m)
            with self.assertRaisesRegex(clrun.InvalidArgumentError, "input 'm' is not given"):
                p.run(x=self.x)
            with self.assertRaisesRegex(clrun.InvalidArgumentError, "no input named 'z'"):
                p.run(x=self.x, m=self.m, z=self.m)
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "closed"):
            p.run(x=self.x, m=self.m)


if __name__ == "__main__":
    unittest.main()
