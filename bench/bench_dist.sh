#!/bin/sh
# Data-parallel training over Open MPI (issue 28), a benchmark, never a test: an MLP (256
# inputs, LAYERS hidden layers of HIDDEN, 10 classes: 6 of 512 by default; random data) trained
# by `clrun train` alone and under `mpirun -np 2` and `-np 3` on this machine (oversubscribed:
# the ranks and their POCL threads share its cores, so the times are no speed-up measure), the
# same global batch throughout. Prints per run the time per step, the last step's all-reduce
# time, the buckets and the bytes all-reduced per step; from REPEAT (default 3) traced 2-rank
# runs the share of the all-reduce time that overlapped kernels of the backward pass (issue
# floor: at least half; the median is taken). Then a model of the step time at 8 to 1,024
# ranks (weak scaling: each rank with the 2-rank run's per-rank batch, whose compute time is
# measured by one process at that batch) from the gradient bytes and a ring all-reduce: each
# rank sends and receives 2(N-1)/N of the bytes, in 2(N-1) hops of a latency each; the
# measured overlap fraction of it hidden behind the backward pass (at most the backward pass,
# taken as 2/3 of the compute). Assumed network: NET_GBPS (default 25 Gb/s per rank) and
# HOP_US (default 5 us per hop).
# Usage: bench/bench_dist.sh [LAYERS] [HIDDEN] [BATCH] [BUCKET]   (CLRUN_BIN, MPIRUN, PYTHON,
# REPEAT, NET_GBPS, HOP_US override)
set -eu
CLRUN=${CLRUN_BIN:-./clrun}
MPIRUN=${MPIRUN:-mpirun}
PYTHON=${PYTHON:-/usr/bin/python3}
LAYERS=${1:-6}
HIDDEN=${2:-512}
BATCH=${3:-128}
BUCKET=${4:-1M}
REPEAT=${REPEAT:-3}
cores=$(getconf _NPROCESSORS_ONLN)
NET_GBPS=${NET_GBPS:-25}
HOP_US=${HOP_US:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
POCL_DEVICES=pthread POCL_MAX_PTHREAD_COUNT=1 OMP_NUM_THREADS=1
OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export POCL_DEVICES POCL_MAX_PTHREAD_COUNT OMP_NUM_THREADS OMPI_MCA_btl \
    OMPI_MCA_btl_vader_single_copy_mechanism

"$PYTHON" - "$tmp" "$LAYERS" "$HIDDEN" "$BATCH" <<'PY'
import sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto
out, layers, h, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
r = np.random.RandomState(0)
rows = batch * 4
np.save(out + "/x.npy", r.rand(rows, 256).astype(np.float32))
np.save(out + "/y.npy", r.randint(0, 10, rows).astype(np.int64))
init, nodes, x = [], [], "x"
dims = [256] + [h] * layers + [10]
for i in range(len(dims) - 1):
    w = (r.rand(dims[i], dims[i + 1]).astype(np.float32) - 0.5) * np.float32(2 / np.sqrt(dims[i]))
    init += [numpy_helper.from_array(w, "w%d" % i),
             numpy_helper.from_array(np.zeros(dims[i + 1], np.float32), "b%d" % i)]
    y = "logits" if i == len(dims) - 2 else "h%d" % i
    nodes.append(helper.make_node("Gemm", [x, "w%d" % i, "b%d" % i], [y]))
    if y != "logits":
        nodes.append(helper.make_node("Relu", [y], ["a%d" % i]))
        x = "a%d" % i
g = helper.make_graph(nodes, "bench_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 256])],
                      [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], init)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, out + "/mlp.onnx")
PY

train="$tmp/mlp.onnx --loss xent:logits --data x=$tmp/x.npy --labels $tmp/y.npy --batch $BATCH
       --epochs 2 --optimizer sgd --lr 0.01 --json"
run() { # N [OPTIONS]: the JSON report of N ranks (1: one process, no mpirun)
    n=$1
    shift
    if [ "$n" = 1 ]; then
        "$CLRUN" train $train "$@" 2>/dev/null | grep -o '{"graph.*}' | tail -1
    else
        "$MPIRUN" --allow-run-as-root --oversubscribe -np "$n" -x POCL_DEVICES \
            -x POCL_MAX_PTHREAD_COUNT -x OMP_NUM_THREADS -x OMPI_MCA_btl \
            -x OMPI_MCA_btl_vader_single_copy_mechanism "$CLRUN" train $train "$@" 2>/dev/null | grep -o '{"graph.*}' | tail -1
    fi
}
echo "bench_dist: MLP 256-${LAYERS}x$HIDDEN-10, global batch $BATCH, --bucket $BUCKET, $cores cores" \
     "(2 and 3 ranks, each with a POCL thread, oversubscribe them: no speed-up measure)"
run 1 >"$tmp/r1"
# the per-rank batch of 2 ranks alone: the compute time of one rank of a large job
run 1 --batch $((BATCH / 2)) >"$tmp/r1half"
for i in $(seq "$REPEAT"); do # the 2-rank run's trace: REPEAT runs (the machine is noisy)
    run 2 --bucket "$BUCKET" --trace "$tmp/trace2-$i.json" >"$tmp/r2-$i"
done
cp "$tmp/r2-1" "$tmp/r2"
run 2 --bucket 0 >"$tmp/r2flat"
run 3 --bucket "$BUCKET" >"$tmp/r3"
"$PYTHON" - "$tmp" "$BATCH" "$NET_GBPS" "$HOP_US" "$REPEAT" <<'PY'
import json, sys
tmp, batch, gbps, hop_us = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
repeat = int(sys.argv[5])
def rep(name):
    return json.loads(open(tmp + "/" + name).read())
def step_ms(r):
    return 1e3 * r["batch"] / r["samples_per_s"]
r1, half = rep("r1"), rep("r1half")
print("%-22s %10s %12s %8s %12s %9s" % ("run", "ms/step", "reduce ms*", "buckets", "bytes/step", "overlap"))
for name, label in [("r1", "1 process"), ("r2flat", "2 ranks, one reduce"), ("r2", "2 ranks, buckets"),
                    ("r3", "3 ranks, buckets")]:
    r = rep(name)
    print("%-22s %10.3f %12s %8s %12s %9s" % (
        label, step_ms(r), "%.3f" % r["reduce_ms_last"] if "reduce_ms_last" in r else "-",
        r.get("buckets", "-"), r.get("reduce_bytes_per_step", "-"),
        "%.2f" % r["reduce_overlap"] if "reduce_overlap" in r else "-"))
print("(ms/step: the last epoch's mean; reduce ms*: the last step's, first bucket's start to last done)")
# the overlap from each trace itself: collective spans against kernel spans
def union(spans):
    out = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out
fracs = []
for i in range(1, repeat + 1):
    ev = json.load(open("%s/trace2-%d.json" % (tmp, i)))["traceEvents"]
    coll = union([(e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") == "collective"])
    kern = union([(e["ts"], e["ts"] + e["dur"]) for e in ev
                  if e.get("ph") == "X" and e.get("cat") != "collective"])
    both = sum(max(0, min(ce, ke) - max(cs, ks)) for cs, ce in coll for ks, ke in kern)
    total = sum(e - s for s, e in coll)
    fracs.append(both / total if total else 0.0)
    print("2 ranks, trace %d: all-reduce %.3f ms (%d buckets), %.3f ms of it beside kernels: "
          "overlap %.2f; step %.3f ms" % (i, total / 1e3, sum(1 for e in ev if e.get("cat") == "collective"),
                                          both / 1e3, fracs[-1], step_ms(rep("r2-%d" % i))))
frac = sorted(fracs)[len(fracs) // 2]
print("2 ranks: median overlap %.2f of the all-reduce time beside backward kernels (floor 0.50: %s)"
      % (frac, "met" if frac >= 0.5 else "NOT met"))
# ring all-reduce model, weak scaling at the 2-rank per-rank batch
grad_bytes = rep("r2")["reduce_bytes_per_step"]
compute_ms = step_ms(half)
bwd_ms = compute_ms * 2 / 3
bw = gbps * 1e9 / 8  # bytes/s
print("model: compute %.3f ms/step per rank (1 process at batch %d), %d gradient bytes, ring "
      "all-reduce at %g Gb/s per rank and %g us per hop, %.2f of it hidden (at most the backward "
      "pass, 2/3 of the compute)" % (compute_ms, batch // 2, grad_bytes, gbps, hop_us, frac))
print("%8s %12s %12s %12s %11s" % ("ranks", "allreduce ms", "exposed ms", "step ms", "efficiency"))
n = 8
while n <= 1024:
    ar = 1e3 * (2 * (n - 1) / n * grad_bytes / bw + 2 * (n - 1) * hop_us * 1e-6)
    exposed = ar - min(frac * ar, bwd_ms)
    step = compute_ms + exposed
    print("%8d %12.3f %12.3f %12.3f %10.1f%%" % (n, ar, exposed, step, 100 * compute_ms / step))
    n *= 2
PY
