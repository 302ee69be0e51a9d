"""Outputs from Python equal the CLI's bit for bit for the same inputs.

`clrun run --seed S` feeds each input deterministic values that Model.example_inputs(S)
reproduces; the CLI prints an XXH64 checksum of every output's bytes (`--json`), which the test
compares with the checksum of what Python got, for several graphs, strategies and modes.
"""

import json
import subprocess
import unittest

import clrun
from support import CLRUN_BIN, example, tool_environment, xxh64

# (graph, --allocator): the CLI's strategies map to Context(allocator=...), its naive and
# planned to load(mode=...).
CASES = [
    ("mlp.graph", "buddy"),
    ("mlp.graph", "slab"),
    ("mlp.graph", "bump"),
    ("mlp.graph", "planned"),
    ("mlp.graph", "naive"),
    ("gpt2_block.graph", "buddy"),
    ("resnet_block.graph", "planned"),
]


def cli_checksums(path, allocator, seed):
    result = subprocess.run([CLRUN_BIN, "run", path, "--json", "--repeat", "1", "--seed", str(seed),
                             "--allocator", allocator, "--time-limit", "0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False,
                            env=tool_environment(CLRUN_ALLOCATOR=""))
    if result.returncode != 0:
        raise AssertionError("clrun run failed: %s" % result.stderr.decode())
    report = json.loads(result.stdout)
    return {o["name"]: o["checksum"] for o in report["outputs"]}


def python_checksums(path, allocator, seed):
    strategy = allocator if allocator not in ("naive", "planned") else None
    mode = allocator if strategy is None else "pooled"
    with clrun.Context(allocator=strategy) as ctx:
        model = ctx.load(path, mode=mode, plan_time_limit=0.2)
        outputs = model(model.example_inputs(seed))
        return {name: xxh64(array) for name, array in outputs.items()}


class SameBitsAsTheCli(unittest.TestCase):
    def test_every_case(self):
        for name, allocator in CASES:
            for seed in (1, 29):
                with self.subTest(graph=name, allocator=allocator, seed=seed):
                    path = example(name)
                    want = cli_checksums(path, allocator, seed)
                    self.assertTrue(want)
                    self.assertEqual(python_checksums(path, allocator, seed), want)

    def test_seeds_change_the_inputs(self):
        path = example("mlp.graph")
        self.assertNotEqual(python_checksums(path, "buddy", 1), python_checksums(path, "buddy", 2))


if __name__ == "__main__":
    unittest.main()
