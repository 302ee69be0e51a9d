"""examples/python/run_onnx.py: runs a model, prints the memory report, and compares the outputs
with reference .npy files (exit status 1 when one differs)."""

import subprocess
import sys
import unittest

from support import GraphFiles, SRCDIR, example

SCRIPT = SRCDIR + "/examples/python/run_onnx.py"


def run(*args):
    result = subprocess.run([sys.executable, SCRIPT] + list(args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True, check=False)
    return result.returncode, result.stdout, result.stderr


class Example(GraphFiles):
    def test_reports_and_compares_with_references(self):
        rc, out, err = run(example("mlp.graph"), "--mode", "planned", "--repeat", "2",
                           "--save-dir", self.path("ref"), "--trace", self.path("t.json"))
        self.assertEqual(rc, 0, err)
        for line in ("model       mlp (6 nodes, ", "input       x float32[64, 784] donated",
                     "peak ", "pool ", "output      y float32[64, 10]"):
            self.assertIn(line, out)
        rc, out, err = run(example("mlp.graph"), "--expect", "y=" + self.path("ref/y.npy"))
        self.assertEqual(rc, 0, err)
        self.assertIn("expect      y: ok (max |difference| 0, bit for bit)", out)
        rc, out, err = run(example("mlp.graph"), "--seed", "2", "--expect",
                           "y=" + self.path("ref/y.npy"))
        self.assertEqual(rc, 1)
        self.assertIn("expect      y: DIFFERENT", out)

    def test_a_library_error_is_one_line_and_status_1(self):
        rc, out, err = run(example("mlp.graph"), "--pool-limit", "100000")
        self.assertEqual(rc, 1)
        self.assertRegex(err, r"^run_onnx: CLRUN_ERROR_OUT_OF_MEMORY: .*MiB.*\n$")


if __name__ == "__main__":
    unittest.main()
