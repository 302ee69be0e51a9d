#!/bin/sh
# clrun run --devices --data-parallel: the global batch split over POCL's two CPU devices (16 + 16
# rows of 32; 11 + 11 + 10 over devices 0, 1, 0) writes the output files of one device byte for
# byte, for an ONNX conv net whose batch is open (bound by an --input file, by --dim and by
# --shape), reports each device's rows (--json), and refuses what it cannot split with a reason.
# Skipped (77) with fewer than two devices or without Python's onnx. Run by `make check`.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
need_onnx_python
EXAMPLES=${srcdir:-.}/examples
make_tmp run-parallel
export POCL_DEVICES="pthread pthread"
export CLRUN_CACHE_DIR="$tmp/cache"
unset CLRUN_DEVICE CLRUN_POOL_LIMIT

"$CLRUN" info >"$tmp/out" 2>&1
if ! grep -q "device 1" "$tmp/out"; then
    echo "skip: data-parallel inference needs two devices (POCL_DEVICES is ignored by this driver)"
    exit 77
fi

# A conv net whose batch N is open, another whose batch is fixed at 32, and 32 rows of input.
"$PYTHON" - "$tmp" <<'PY' || exit 99
import sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto
out = sys.argv[1]
rng = np.random.default_rng(3)
def init(name, shape):
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)
inits = [init("cw", (4, 3, 3, 3)), init("cb", (4,)), init("w", (256, 10)), init("b", (10,))]
nodes = [helper.make_node("Conv", ["x", "cw", "cb"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("Flatten", ["r"], ["f"], axis=1),
         helper.make_node("MatMul", ["f", "w"], ["m"]),
         helper.make_node("Add", ["m", "b"], ["logits"])]
for name, batch in (("net", "N"), ("fixed", 32)):
    g = helper.make_graph(nodes, name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 8, 8])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 10])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, f"{out}/{name}.onnx")
np.save(f"{out}/x.npy", rng.standard_normal((32, 3, 8, 8)).astype(np.float32))
PY

net="$tmp/net.onnx"
"$CLRUN" run "$net" --input x="$tmp/x.npy" --repeat 1 --output-dir "$tmp/one" >"$tmp/one.txt" 2>"$tmp/err"; rc=$?
expect 0 "checksum" "$tmp/one.txt" "one device"
want=$(sed -n 's/^output .* checksum \([0-9a-f]*\)$/\1/p' "$tmp/one.txt")
for devices in 0,1 0,1,0; do
    "$CLRUN" run "$net" --input x="$tmp/x.npy" --repeat 2 --devices $devices --data-parallel \
        --output-dir "$tmp/dp-$devices" >"$tmp/out" 2>"$tmp/err"; rc=$?
    expect 0 "data parallel over [23] devices, global batch 32" "$tmp/out" "--devices $devices --data-parallel"
    cmp -s "$tmp/one/logits.npy" "$tmp/dp-$devices/logits.npy" ||
        fail "--devices $devices --data-parallel: logits.npy differs from one device's"
    grep -q "^output      logits checksum $want\$" "$tmp/out" || fail "--devices $devices: checksum: $(cat "$tmp/out")"
done
grep -q "device 1 (.*): rows \[11, 22), weights " "$tmp/out" || fail "device 1's line: $(cat "$tmp/out")"

# Seeded inputs with the batch bound by --dim and by --shape: the one-device checksum.
for bind in "--dim N=32" "--shape x=32x3x8x8"; do
    "$CLRUN" run "$net" $bind --repeat 1 >"$tmp/one.txt" 2>"$tmp/err" || fail "$bind, one device: $(cat "$tmp/err")"
    want=$(sed -n 's/^output .* checksum \([0-9a-f]*\)$/\1/p' "$tmp/one.txt")
    "$CLRUN" run "$net" $bind --repeat 1 --devices 0,1,0 --data-parallel --json >"$tmp/out" 2>"$tmp/err"; rc=$?
    expect 0 '"checksum":"'"$want"'"' "$tmp/out" "$bind --data-parallel"
done
/usr/bin/python3 - "$tmp/out" <<'PY' || fail "--data-parallel --json: $(cat "$tmp/out")"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["data_parallel"] is True and o["batch"] == 32, o
assert o["devices"] == [0, 1, 0] and o["device_batch"] == [11, 11, 10], o
assert [(s["device"], s["first_row"], s["rows"]) for s in o["shares"]] == [(0, 0, 11), (1, 11, 11), (0, 22, 10)], o
assert all(s["weights_bytes"] > 0 and s["peak_bytes"] >= s["weights_bytes"] for s in o["shares"]), o
assert o["rows_per_s"] > 0 and o["outputs"][0]["shape"] == [32, 10], o
PY

# A .graph file: its batch (64) is each device's share.
"$CLRUN" run "$EXAMPLES/mlp.graph" --repeat 1 --devices 0,1 --data-parallel >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 0 "data parallel over 2 devices, global batch 128" "$tmp/out" ".graph --data-parallel"
grep -q "device 1 (.*): rows \[64, 128)" "$tmp/out" || fail ".graph: device 1's line: $(cat "$tmp/out")"

# Refused, with a reason.
"$CLRUN" run "$tmp/fixed.onnx" --devices 0,1 --data-parallel >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 2 "at a share of 16 rows (of 32) did not load: each device's share needs an ONNX model whose batch is open" "$tmp/err" "a fixed batch"
"$CLRUN" run "$net" --dim N=1 --devices 0,1 --data-parallel >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 2 "a batch of 1 rows is less than a row for each of the 2 shares" "$tmp/err" "a batch below the devices"
"$CLRUN" run "$net" --dim N=32 --devices 0,7 --data-parallel >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 1 "run_parallel: the context of device 7 (share 1)" "$tmp/err" "unknown device"
"$CLRUN" run "$net" --dim N=32 --data-parallel >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 2 "--data-parallel goes with --devices" "$tmp/err" "--data-parallel alone"
"$CLRUN" run "$net" --dim N=32 --devices 0,1 --data-parallel --micro-batches 2 >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 2 "not with --data-parallel" "$tmp/err" "--data-parallel --micro-batches"
"$CLRUN" run "$EXAMPLES/mlp.graph" --devices 0,1 --data-parallel --output-dir "$tmp/g" >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 2 "with a .graph file (its batch is each device's share) takes no --input or --output-dir" "$tmp/err" ".graph --output-dir"

[ $failures = 0 ] || exit 1
echo "cli_run_parallel: all passed"
