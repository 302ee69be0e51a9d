#!/bin/sh
# clrun train --deterministic under mpirun (this machine's loopback, oversubscribed): one
# process, 2 and 3 ranks save byte-identical train states (cmp) after 24 steps at a global
# batch of 32, per row (32 chunks: 3 ranks take 11, 11 and 10) and in chunks of 4 rows (8
# chunks: 3, 3 and 2); the deterministic run is the plain one within 1e-6 relative (the same
# gradient, summed in another order); a batch of fewer chunks than ranks, a batch that is no
# multiple of the chunk, and --chunk alone are refused by name. Skipped when configure found no
# MPI or mpirun is missing. Run by `make check`; CLRUN_BIN overrides the tool.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
. "${srcdir:-.}/tests/cli_mpi_common.sh"
make_tmp train-mpi-det

# The digits (as tests/cli_train.sh makes them; 384 rows: 12 steps of 32) and an MLP whose
# batch is open, so that each rank binds its own share of it.
"$PYTHON" - "$tmp" <<'PY' || exit 99
import sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto
from sklearn.datasets import load_digits
out = sys.argv[1]
d = load_digits()
x = (d.data / 16.0).astype(np.float32)
y = d.target.astype(np.int64)
p = np.random.RandomState(0).permutation(len(x))
np.save(out + "/x.npy", x[p][:384]); np.save(out + "/y.npy", y[p][:384])
r = np.random.RandomState(1)
init = [numpy_helper.from_array(r.uniform(-b, b, s).astype(np.float32), n) for n, s, b in
        [("w1", (64, 32), 0.125), ("b1", (32,), 0.125), ("w2", (32, 10), 0.17), ("b2", (10,), 0.17)]]
nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]), helper.make_node("Relu", ["h"], ["a"]),
         helper.make_node("Gemm", ["a", "w2", "b2"], ["logits"])]
g = helper.make_graph(nodes, "digits_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
                      [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], init)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, out + "/mlp.onnx")
PY

# same A.onnx B.onnx WHAT: the trained initializers agree within 1e-6 of each tensor's largest.
same() {
    "$PYTHON" - "$1" "$2" <<'PY' || fail "$3: other parameters than one process"
import sys
import numpy as np
import onnx
from onnx import numpy_helper
a, b = ({i.name: numpy_helper.to_array(i).astype(np.float64) for i in onnx.load(p).graph.initializer}
        for p in sys.argv[1:3])
worst = max(np.abs(a[k] - b[k]).max() / np.abs(b[k]).max() for k in b)
print("largest relative difference %.3g" % worst)
sys.exit(0 if worst <= 1e-6 else 1)
PY
}


train="$tmp/mlp.onnx --loss xent:logits --data x=$tmp/x.npy --labels $tmp/y.npy --batch 32 --epochs 2"
train="$train --optimizer adam --lr 0.01"

# The plain step and the deterministic one, alone: the same training within 1e-6.
"$CLRUN" train $train --save-onnx "$tmp/plain.onnx" >"$tmp/out" 2>&1
rc=$?
expect 0 'epoch 2/2' "$tmp/out" "plain, one process"
"$CLRUN" train $train --deterministic --save-state "$tmp/s1" --save-onnx "$tmp/det.onnx" --json \
    >"$tmp/out" 2>&1
rc=$?
expect 0 '"batch":32,"chunk_rows":1,"chunks":32,"epochs":2,"steps":24' "$tmp/out" \
    "--deterministic, one process"
same "$tmp/det.onnx" "$tmp/plain.onnx" "--deterministic, one process against the plain step"

# 2 and 3 ranks, per row: the same bytes. Rank 0 reports the time its reductions took, and
# its trace holds the last one after the backward pass.
for n in 2 3; do
    mpi $n "$CLRUN" train $train --deterministic --save-state "$tmp/s$n" --json \
        --trace "$tmp/trace$n.json" >"$tmp/out" 2>&1
    rc=$?
    expect 0 "\"ranks\":$n,.*\"reduce_ms_per_step\":" "$tmp/out" "--deterministic, $n ranks"
    cmp "$tmp/s1" "$tmp/s$n" || fail "--deterministic, $n ranks: another state than one process"
    grep -q '"name":"gradient sum (gather to rank 0, broadcast)","cat":"collective"' \
        "$tmp/trace$n.json" || fail "--deterministic, $n ranks: no reduction in the trace"
done

# Chunks of 4 rows (8 chunks, 3 ranks: 3, 3 and 2 of them): the same bytes again.
"$CLRUN" train $train --deterministic --chunk 4 --save-state "$tmp/c1" >"$tmp/out" 2>&1
rc=$?
expect 0 'epoch 2/2' "$tmp/out" "--chunk 4, one process"
mpi 3 "$CLRUN" train $train --deterministic --chunk 4 --save-state "$tmp/c3" --json \
    >"$tmp/out" 2>&1
rc=$?
expect 0 '"rank_batch":12,"chunk_rows":4,"chunks":8' "$tmp/out" "--chunk 4, 3 ranks"
cmp "$tmp/c1" "$tmp/c3" || fail "--chunk 4, 3 ranks: another state than one process"
cmp -s "$tmp/s1" "$tmp/c1" && fail "--chunk 4: the state of chunks of 1 row (no chunking?)"

# Refused by name, before any work.
mpi 3 "$CLRUN" train $train --deterministic --chunk 16 >"$tmp/out" 2>&1
rc=$?
expect 2 "makes 2 chunks, fewer than the 3 ranks" "$tmp/out" "2 chunks on 3 ranks"
"$CLRUN" train $train --deterministic --chunk 5 >"$tmp/out" 2>&1
rc=$?
expect 2 "--batch 32 is no multiple of --chunk 5" "$tmp/out" "--chunk 5"
"$CLRUN" train $train --chunk 4 >"$tmp/out" 2>&1
rc=$?
expect 2 "--chunk is for --deterministic" "$tmp/out" "--chunk alone"

exit $((failures > 0))
