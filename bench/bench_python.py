#!/usr/bin/env python3
"""The Python binding's overhead (a benchmark, never a test): calling a model from Python
against the same calls from C, both measured in one run.

    bench/bench_python.py [--rounds R] [--calls N] [--builddir DIR] [FILE.graph ...]

The C calls are made by bench/bench_call.c, a module of the public API that `make bench` builds
(bench/libbench_call.la) and this script loads into its own process: C and Python call the same
executor of the same context, in blocks of N calls that alternate R times, so both meet the
same machine. A call is the same work on both sides: upload the inputs (host case), run, read
every output into host memory (from Python: new numpy arrays).

For each graph (default: examples/mlp.graph, a small MLP, and a one-node graph whose call is
almost nothing but overhead) and each way of passing inputs (numpy arrays uploaded per call;
device arrays uploaded once), the report gives, over every call of every block:
  C, Python     the median microseconds per call, and their ratio (the figure asked for);
  outside       the median microseconds per call spent outside the executor's own run (the
                call minus its clrun_exec_stats.wall_ms): uploads, reads and, from Python,
                the binding;
  overhead      Python's outside minus C's: what the binding adds to a call, and the ratio
                that alone implies (C + overhead) / C, free of the kernels' run-to-run noise.
Run it from the build tree after `make bench`.
"""

import argparse
import ctypes
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

TINY = """graph tiny
input x: f32[64, 64]
node y: f32[64, 64] = relu(x)
output y
"""


def setup(builddir):
    """Imports the build tree's clrun and loads the C side (after the library, whose soname it
    shares, so both use the one copy)."""
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    library = os.path.join(builddir, ".libs", "libclrun.so.0")
    if "CLRUN_LIBRARY" not in os.environ and os.path.exists(library):
        os.environ["CLRUN_LIBRARY"] = library
    import clrun
    module = os.path.join(builddir, "bench", ".libs", "libbench_call.so")
    if not os.path.exists(module):
        sys.exit("bench_python: %s is missing: run 'make bench' first" % module)
    c = ctypes.CDLL(module)
    c.bench_call_run.restype = ctypes.c_int
    return clrun, c


class CSide:
    """The arguments of bench_call_run for one model, built once."""

    def __init__(self, c, ctx, model, values, device):
        from clrun import _lib
        self.c = c
        self.ctx = ctx._pointer()
        self.exec = model._state.exec
        self.hosts = [values[i.name] if not device else None for i in model.inputs]
        n_in, n_out = len(model.inputs), len(model.outputs)
        self.host_in = (ctypes.c_void_p * max(1, n_in))(
            *[h.ctypes.data if h is not None else None for h in self.hosts])
        self.in_bytes = (ctypes.c_uint64 * max(1, n_in))(
            *[int(values[i.name].nbytes) for i in model.inputs])
        self.donated = (ctypes.c_bool * max(1, n_in))(*[i.donated for i in model.inputs])
        self.device_in = None
        if device:
            self.device_in = (_lib.Buffer * n_in)(*[values[i.name]._state.buffer
                                                    for i in model.inputs])
        import numpy as np
        self.outs = [np.empty(o.shape, o.dtype) for o in model.outputs]
        self.host_out = (ctypes.c_void_p * max(1, n_out))(*[o.ctypes.data for o in self.outs])
        self.out_bytes = (ctypes.c_uint64 * max(1, n_out))(*[o.nbytes for o in self.outs])
        self.n_in, self.n_out = n_in, n_out

    def run(self, calls):
        times = (ctypes.c_double * calls)()
        outside = (ctypes.c_double * calls)()
        status = self.c.bench_call_run(
            self.ctx, self.exec, self.n_in, self.host_in,
            self.in_bytes, self.donated, self.device_in, self.n_out, self.host_out,
            self.out_bytes, calls, times, outside)
        if status != 0:
            raise RuntimeError("bench_call_run failed with status %d" % status)
        return list(times), list(outside)


def python_block(model, values, calls):
    times, outside = [], []
    clock = time.perf_counter_ns
    for _ in range(calls):
        start = clock()
        model(values)
        elapsed = (clock() - start) / 1e3
        times.append(elapsed)
        outside.append(elapsed - model.stats()["wall_ms"] * 1e3)
    return times, outside


def measure(clrun, c, path, inputs, rounds, calls):
    with clrun.Context() as ctx:
        model = ctx.load(path, donate=[] if inputs == "device" else None)
        values = model.example_inputs(1)
        if inputs == "device":
            values = {name: ctx.array(v) for name, v in values.items()}
        side = CSide(c, ctx, model, values, inputs == "device")
        side.run(2)
        model(values)  # warm-up, both sides
        if not calls:
            calls = max(10, int(0.1e6 / statistics.median(side.run(10)[0])))
        c_times, c_out, p_times, p_out = [], [], [], []
        for _ in range(rounds):
            t, o = side.run(calls)
            c_times += t
            c_out += o
            t, o = python_block(model, values, calls)
            p_times += t
            p_out += o
        model.close()
    med = statistics.median
    return calls, med(c_times), med(p_times), med(c_out), med(p_out)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("graphs", nargs="*")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--calls", type=int, default=0, help="calls per block (default: about 0.1 s)")
    p.add_argument("--builddir", default=os.path.join(HERE, ".."))
    a = p.parse_args(argv)
    clrun, c = setup(a.builddir)

    with tempfile.TemporaryDirectory() as tmp:
        graphs = a.graphs
        if not graphs:
            tiny = os.path.join(tmp, "tiny.graph")
            with open(tiny, "w") as f:
                f.write(TINY)
            graphs = [os.path.join(HERE, "..", "examples", "mlp.graph"), tiny]
        print("device %s; %d rounds of C and Python blocks, one process, one executor"
              % (clrun.devices()[0].name, a.rounds))
        print("%-6s %-6s %6s | %9s %9s %6s | %8s %8s | %8s %6s" % (
            "graph", "inputs", "calls", "C us", "Python us", "ratio", "C out", "Py out",
            "overhead", "ratio"))
        for path in graphs:
            for inputs in ("host", "device"):
                calls, c_call, p_call, c_out, p_out = measure(clrun, c, path, inputs, a.rounds,
                                                              a.calls)
                overhead = p_out - c_out
                name = os.path.basename(path).replace(".graph", "")
                print("%-6s %-6s %6d | %9.1f %9.1f %6.3f | %8.1f %8.1f | %8.1f %6.3f" % (
                    name, inputs, calls, c_call, p_call, p_call / c_call, c_out, p_out, overhead,
                    (c_call + overhead) / c_call))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
