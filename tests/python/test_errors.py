"""Every failing status raises a clrun.Error subclass carrying the status name and the
library's message; a failure leaves nothing behind."""

import os
import pickle
import unittest

import numpy as np

import clrun
from clrun import _lib
from clrun.errors import error
from support import GraphFiles, example

# y = matmul(x, w): a 4 KiB input and constant, a 4 MiB output.
WIDE = """graph wide
input x: f32[1024, 1]
const w: f32[1, 1024] uniform(-1, 1) seed=3
node y: f32[1024, 1024] = matmul(x, w)
output y
"""


class Classes(unittest.TestCase):
    def test_every_status_has_its_class_and_name(self):
        seen = set()
        for status in range(-1, -21, -1):
            e = error(status, "why")
            self.assertIsInstance(e, clrun.Error)
            self.assertIsNot(type(e), clrun.Error, status)
            self.assertEqual(e.name, _lib.text(_lib.status_name(status)))
            self.assertTrue(e.name.startswith("CLRUN_ERROR_"))
            self.assertEqual(str(e), e.name + ": why")
            seen.add(type(e))
        self.assertEqual(len(seen), 20)

    def test_the_tables_are_the_librarys(self):
        from clrun import _context, errors
        codes, code = {}, -1
        while _lib.text(_lib.status_name(code)) != "CLRUN_UNKNOWN":
            codes[code] = _lib.text(_lib.status_name(code))
            code -= 1
        self.assertEqual(errors.STATUSES, codes)
        self.assertEqual(errors.INVALID_ARGUMENT, -1)
        self.assertEqual(sorted(_context.DTYPES), list(range(len(_context.DTYPES))))
        for code, dtype in _context.DTYPES.items():
            self.assertEqual(dtype.itemsize, _lib.lib.clrun_dtype_size(code))
            name = _lib.text(_lib.dtype_name(code))  # "f32", "i64", "bool"
            self.assertEqual(name, "bool" if dtype == np.bool_ else
                             "%s%d" % (dtype.kind, dtype.itemsize * 8))

    def test_python_kinds(self):
        self.assertTrue(issubclass(clrun.OutOfMemoryError, MemoryError))
        self.assertTrue(issubclass(clrun.InvalidGraphError, ValueError))
        self.assertTrue(issubclass(clrun.InvalidArgumentError, ValueError))
        self.assertTrue(issubclass(clrun.InputOutputError, OSError))
        self.assertTrue(issubclass(clrun.UnsupportedOpError, clrun.UnsupportedError))

    def test_without_a_message_the_librarys_sentence(self):
        self.assertEqual(error(-6).message, "out of device memory in the pool")

    def test_pickles(self):
        e = pickle.loads(pickle.dumps(error(-17, "input 'x' was donated")))
        self.assertIsInstance(e, clrun.DonatedError)
        self.assertEqual((e.status, e.message), (-17, "input 'x' was donated"))


class Failures(GraphFiles):
    def setUp(self):
        super().setUp()
        self.ctx = clrun.Context()
        self.addCleanup(self.ctx.close)

    def assert_load_fails(self, text, cls, name, fragment):
        path = self.graph(text)
        with self.assertRaises(cls) as caught:
            self.ctx.load(path)
        e = caught.exception
        self.assertEqual(e.name, name)
        self.assertIn(fragment, e.message)
        self.assertTrue(e.message.startswith(path + ":"), e.message)  # FILE:LINE:COL: message
        self.assertEqual(self.ctx.memory_stats()["in_use"], 0)

    def test_malformed_file_is_a_parse_error(self):
        self.assert_load_fails("graph g\ninput x f32[4]\n", clrun.ParseError, "CLRUN_ERROR_PARSE",
                               ":2:")

    def test_unknown_op_is_unsupported(self):
        self.assert_load_fails("graph g\ninput x: f32[4]\nnode y = matmull(x, x)\noutput y\n",
                               clrun.UnsupportedOpError, "CLRUN_ERROR_UNKNOWN_KERNEL",
                               "unknown op 'matmull'")

    def test_undefined_tensor_is_an_invalid_graph(self):
        self.assert_load_fails("graph g\ninput x: f32[4]\nnode y = relu(h2)\noutput y\n",
                               clrun.InvalidGraphError, "CLRUN_ERROR_INVALID_GRAPH",
                               "'h2' is not defined")

    def test_an_ops_refusal_is_an_invalid_graph(self):
        self.assert_load_fails("graph g\ninput a: f32[4]\ninput b: i32[4]\nnode y = add(a, b)\n"
                               "output y\n", clrun.InvalidGraphError, "CLRUN_ERROR_INVALID_GRAPH",
                               "add: dtypes differ")

    def test_missing_file_is_an_io_error(self):
        with self.assertRaises(clrun.InputOutputError) as caught:
            self.ctx.load(self.path("absent.graph"))
        self.assertEqual(caught.exception.name, "CLRUN_ERROR_IO")
        self.assertIn("absent.graph: cannot read", caught.exception.message)

    def test_onnx_without_the_importer_is_unsupported(self):
        if _lib.graph_load_onnx is not None:
            self.skipTest("this libclrun imports ONNX")
        with self.assertRaisesRegex(clrun.UnsupportedError, "no ONNX import"):
            self.ctx.load(self.path("model.onnx"))

    def test_bad_context_options(self):
        with self.assertRaisesRegex(clrun.UnknownAllocatorError, "unknown allocator 'budy'"):
            clrun.Context(allocator="budy")
        with self.assertRaises(clrun.NoDeviceError) as caught:
            clrun.Context(device="no-such-device")
        self.assertIn("devices that exist", caught.exception.message)
        with self.assertRaises(clrun.InvalidArgumentError):
            clrun.Context(pool_limit=0)

    def test_bad_environment_is_an_invalid_option(self):
        os.environ["CLRUN_QUEUE"] = "sideways"
        try:
            with self.assertRaisesRegex(clrun.InvalidOptionError, "CLRUN_QUEUE='sideways'"):
                clrun.Context()
        finally:
            del os.environ["CLRUN_QUEUE"]


class PoolLimit(GraphFiles):
    def test_weights_over_the_limit_fail_the_load(self):
        with clrun.Context(pool_limit=1 << 20) as ctx:
            self.assertEqual(ctx.memory_stats()["limit"], 1 << 20)
            with self.assertRaises(clrun.OutOfMemoryError) as caught:
                ctx.load(example("mlp.graph"))  # 2.6 MB of weights
            e = caught.exception
            self.assertEqual(e.name, "CLRUN_ERROR_OUT_OF_MEMORY")
            self.assertIn("2.55 MiB", e.message)  # what the weights need
            self.assertIn("1.00 MiB", e.message)  # the limit
            self.assertEqual(ctx.memory_stats()["in_use"], 0)

    def test_intermediates_over_the_limit_fail_the_run_and_leave_nothing(self):
        with clrun.Context(pool_limit=2 << 20) as ctx:
            model = ctx.load(self.graph(WIDE))
            resident = ctx.memory_stats()["in_use"]
            x = np.ones((1024, 1), np.float32)
            for _ in range(2):  # a failed run changes nothing: the next fails the same way
                with self.assertRaisesRegex(clrun.OutOfMemoryError, r"asked for 4\.00 MiB") as caught:
                    model(x=x)
                self.assertIn("limit 2.00 MiB", caught.exception.message)
                self.assertEqual(ctx.memory_stats()["in_use"], resident)
            donating = ctx.load(self.graph(WIDE, "donating.graph"), donate=["x"])
            resident = ctx.memory_stats()["in_use"]
            device = ctx.array(x)
            with self.assertRaises(clrun.OutOfMemoryError):  # the run's error, not a donation's
                donating(x=device)
            self.assertTrue(device.donated)  # a failed run consumed it too, and freed it
            self.assertEqual(ctx.memory_stats()["in_use"], resident)
            device.free()
            self.assertEqual(ctx.memory_stats()["in_use"], resident)
            with clrun.Context() as roomy:  # the same model fits without the limit
                self.assertEqual(roomy.load(self.graph(WIDE, "wide.graph"))(x=x)["y"].shape,
                                 (1024, 1024))


if __name__ == "__main__":
    unittest.main()
