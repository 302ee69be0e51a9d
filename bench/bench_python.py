#!/usr/bin/env python3
"""The Python binding's overhead (a benchmark, never a test): calling a model from Python
against the same calls from C (bench/bench_call), both measured in one run.

    bench/bench_python.py [--rounds R] [--calls N] [--builddir DIR] [FILE.graph ...]

For each graph (default: examples/mlp.graph, a small MLP, and a one-node graph whose call is
almost nothing but overhead) and each way of passing inputs (numpy arrays uploaded per call;
device arrays uploaded once), R rounds alternate a C process making N calls and N calls from
this process through `clrun`. A call is the same work on both sides: upload the inputs (host
case), run, read every output into host memory (from Python: new numpy arrays).

Reported per case, as medians over the rounds of each round's medians:
  C, Python     microseconds per call, and their ratio (the figure asked for); min: the
                ratio of the fastest calls, the least disturbed by other work;
  outside       microseconds per call spent outside the executor's own run (each call's time
                minus its clrun_exec_stats.wall_ms, median over calls): uploads, reads and,
                from Python, the binding;
  overhead      Python's outside minus C's: what the binding adds to a call, free of the
                kernels' run-to-run noise on a shared machine, and the ratio it alone implies.
Run it from the build tree after `make bench`.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

TINY = """graph tiny
input x: f32[64, 64]
node y: f32[64, 64] = relu(x)
output y
"""


def setup_paths(builddir):
    """Lets `import clrun` find the package and library of the build tree."""
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    library = os.path.join(builddir, ".libs", "libclrun.so.0")
    if "CLRUN_LIBRARY" not in os.environ and os.path.exists(library):
        os.environ["CLRUN_LIBRARY"] = library


def c_side(builddir, path, calls, inputs):
    out = subprocess.run([os.path.join(builddir, "bench", "bench_call"), path, "--calls",
                          str(calls), "--inputs", inputs], stdout=subprocess.PIPE, check=True)
    report = json.loads(out.stdout)
    return report["median_us"], report["min_us"], report["outside_median_us"]


def python_side(clrun, path, calls, inputs):
    with clrun.Context() as ctx:
        model = ctx.load(path, donate=[] if inputs == "device" else None)
        values = model.example_inputs(1)
        if inputs == "device":
            values = {name: ctx.array(v) for name, v in values.items()}
        model(values)  # warm-up
        times, outside = [], []
        clock = time.perf_counter_ns
        for _ in range(calls):
            start = clock()
            model(values)
            elapsed = (clock() - start) / 1e3
            times.append(elapsed)
            outside.append(elapsed - model.stats()["wall_ms"] * 1e3)
        model.close()
    return statistics.median(times), min(times), statistics.median(outside)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("graphs", nargs="*")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=0, help="calls per round (default: about 0.3 s)")
    p.add_argument("--builddir", default=os.path.join(HERE, ".."))
    a = p.parse_args(argv)
    setup_paths(a.builddir)
    import clrun

    with tempfile.TemporaryDirectory() as tmp:
        graphs = a.graphs
        if not graphs:
            tiny = os.path.join(tmp, "tiny.graph")
            with open(tiny, "w") as f:
                f.write(TINY)
            graphs = [os.path.join(HERE, "..", "examples", "mlp.graph"), tiny]
        print("device %s; %d rounds, C and Python alternating" % (clrun.devices()[0].name, a.rounds))
        print("%-6s %-6s %6s | %9s %9s %6s %6s | %8s %8s | %8s %6s" % (
            "graph", "inputs", "calls", "C us", "Python us", "ratio", "min", "C out", "Py out",
            "overhead", "ratio"))
        for path in graphs:
            for inputs in ("host", "device"):
                calls = a.calls or max(20, int(0.3e6 / c_side(a.builddir, path, 20, inputs)[0]))
                c_calls, p_calls, ratios, min_ratios, c_out, p_out = [], [], [], [], [], []
                for _ in range(a.rounds):
                    c, c_min, c_outside = c_side(a.builddir, path, calls, inputs)
                    py, py_min, py_outside = python_side(clrun, path, calls, inputs)
                    c_calls.append(c)
                    p_calls.append(py)
                    ratios.append(py / c)
                    min_ratios.append(py_min / c_min)
                    c_out.append(c_outside)
                    p_out.append(py_outside)
                med = statistics.median
                c_call = med(c_calls)
                overhead = med(p_out) - med(c_out)
                name = os.path.basename(path).replace(".graph", "")
                print("%-6s %-6s %6d | %9.1f %9.1f %6.3f %6.3f | %8.1f %8.1f | %8.1f %6.3f" % (
                    name, inputs, calls, c_call, med(p_calls), med(ratios), med(min_ratios),
                    med(c_out), med(p_out), overhead, (c_call + overhead) / c_call))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
