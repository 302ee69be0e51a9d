#!/usr/bin/env python3
"""Loads a model with clrun, runs it on numpy inputs, prints the memory report, and compares the
outputs with numpy references when they are given.

    run_onnx.py MODEL.onnx|MODEL.graph [--input NAME=FILE.npy ...] [--seed S]
                [--dims NAME=N ...] [--mode pooled|planned|naive] [--allocator buddy|slab|bump]
                [--pool-limit BYTES] [--donate NAME ...] [--repeat N] [--trace OUT.json]
                [--expect NAME=FILE.npy ...] [--rtol R] [--atol A] [--save-dir DIR]

Inputs not given as .npy files get the values `clrun run --seed S` uses. With --expect, each
named output is compared with the reference array (numpy.allclose with --rtol/--atol, and
whether it is bit for bit the same); the exit status is 1 when one differs.

Example, from the build tree:

    PYTHONPATH=python CLRUN_LIBRARY=.libs/libclrun.so.0 \\
        examples/python/run_onnx.py examples/mlp.graph --mode planned --repeat 10
"""

import argparse
import os
import sys
import time

import numpy as np

import clrun


def mib(n):
    return "%.2f MiB" % (n / 2**20)


def pairs(items, what):
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            sys.exit("run_onnx: %s takes NAME=VALUE, not '%s'" % (what, item))
        out[name] = value
    return out


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", help="an .onnx model or a .graph file")
    p.add_argument("--input", action="append", metavar="NAME=FILE.npy", help="an input's values")
    p.add_argument("--seed", type=int, default=1, help="seed of the inputs not given (default 1)")
    p.add_argument("--dims", action="append", metavar="NAME=N", help="an ONNX symbolic dimension")
    p.add_argument("--mode", choices=("pooled", "planned", "naive"), help="executor mode")
    p.add_argument("--allocator", help="pool strategy: buddy, slab or bump")
    p.add_argument("--pool-limit", help="most bytes the pool may reserve (4096, 64M, 1GiB)")
    p.add_argument("--donate", action="append", metavar="NAME", help="an input each run consumes")
    p.add_argument("--repeat", type=int, default=1, help="runs to time (default 1)")
    p.add_argument("--trace", metavar="OUT.json", help="Chrome/Perfetto trace of the last run")
    p.add_argument("--expect", action="append", metavar="NAME=FILE.npy", help="a reference output")
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--atol", type=float, default=1e-6)
    p.add_argument("--save-dir", metavar="DIR", help="write every output as DIR/NAME.npy")
    return p.parse_args(argv)


def report(ctx, model, times):
    s = model.stats()
    m = ctx.memory_stats()
    print("model       %s (%d nodes, %d kernels) on %s, mode %s, allocator %s"
          % (model.name, s["graph_nodes"], s["kernels"], ctx.device.name, s["mode"], s["allocator"]))
    for info in model.inputs:
        print("input       %s %s%s%s" % (info.name, info.dtype, list(info.shape),
                                         " donated" if info.donated else ""))
    print("time        %.3f ms per run (median of %d, Python call included)"
          % (1e3 * sorted(times)[len(times) // 2], len(times)))
    print("peak        %s in use (%.2fx the lower bound %s), naive %s (saving %.1f%%)"
          % (mib(s["peak_bytes"]), s["peak_over_lower_bound"] or 0, mib(s["lower_bound_bytes"]),
             mib(s["naive_bytes"]), 100 * (s["saving_over_naive"] or 0)))
    print("weights     %s resident; %d donations in place%s"
          % (mib(s["constant_bytes"]), s["donations"],
             ", unused: " + ", ".join(s["unused_donated"]) if s["unused_donated"] else ""))
    print("pool        %s: %s in use (peak %s), %s reserved in %d chunks, largest free %s, "
          "fragmentation %.2f" % (m["strategy"], mib(m["in_use"]), mib(m["in_use_peak"]),
                                  mib(m["reserved"]), m["chunks"], mib(m["largest_free"]),
                                  m["fragmentation"]))


def compare(outputs, expected, rtol, atol):
    failed = 0
    for name, path in expected.items():
        if name not in outputs:
            print("expect      %s: the model has no such output" % name)
            failed += 1
            continue
        got, want = outputs[name], np.load(path)
        if got.shape != want.shape:
            print("expect      %s: shape %s, reference %s" % (name, got.shape, want.shape))
            failed += 1
            continue
        same_bits = got.dtype == want.dtype and got.tobytes() == want.tobytes()
        close = np.allclose(got, want, rtol=rtol, atol=atol)
        worst = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if got.size else 0.0
        print("expect      %s: %s (max |difference| %.3g%s)"
              % (name, "ok" if close else "DIFFERENT", worst, ", bit for bit" if same_bits else ""))
        failed += not close
    return failed


def main(argv):
    a = parse_args(argv)
    dims = {k: int(v) for k, v in pairs(a.dims, "--dims").items()}
    given = {k: np.load(v) for k, v in pairs(a.input, "--input").items()}
    expected = pairs(a.expect, "--expect")
    try:
        with clrun.Context(allocator=a.allocator, pool_limit=a.pool_limit) as ctx:
            model = ctx.load(a.model, dims=dims or None, mode=a.mode, donate=a.donate,
                             profile=a.trace is not None)
            # Every input given: a model with symbolic dimensions takes them from the arrays.
            inputs = {} if set(given) == {i.name for i in model.inputs} else \
                model.example_inputs(a.seed)
            inputs.update(given)
            times = []
            for _ in range(max(1, a.repeat)):
                start = time.perf_counter()
                outputs = model(inputs)
                times.append(time.perf_counter() - start)
            report(ctx, model, times)
            for name, array in outputs.items():
                print("output      %s %s%s" % (name, array.dtype, list(array.shape)))
                if a.save_dir:
                    os.makedirs(a.save_dir, exist_ok=True)
                    np.save(os.path.join(a.save_dir, name + ".npy"), array)
            if a.trace:
                model.trace(a.trace)
                print("trace       %s" % a.trace)
            return 1 if compare(outputs, expected, a.rtol, a.atol) else 0
    except clrun.Error as e:
        print("run_onnx: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
