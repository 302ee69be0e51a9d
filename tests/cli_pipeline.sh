#!/bin/sh
# clrun run --devices: the pipeline over POCL's two CPU devices gives the checksum of one device,
# holds each stage to --device-limit, streams --micro-batches with micro-batch 0's checksum the
# one device's, and refuses what it cannot do with a reason. Skipped (77)
# with fewer than two devices. Run by `make check` from the build directory.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
EXAMPLES=${srcdir:-.}/examples
make_tmp pipeline-test
export POCL_DEVICES="pthread pthread"
export CLRUN_CACHE_DIR="$tmp/cache"
unset CLRUN_DEVICE CLRUN_POOL_LIMIT

"$CLRUN" info >"$tmp/out" 2>&1
if ! grep -q "device 1" "$tmp/out"; then
    echo "skip: the pipeline needs two devices (POCL_DEVICES is ignored by this driver)"
    exit 77
fi

"$CLRUN" run "$EXAMPLES/mlp.graph" --repeat 1 >"$tmp/one" 2>"$tmp/err"; rc=$?
expect 0 "checksum" "$tmp/one" "one device"
want=$(sed -n 's/^output .* checksum \([0-9a-f]*\)$/\1/p' "$tmp/one")
[ -n "$want" ] || fail "no checksum in the one-device report"

# 2 MiB each: the 2.55 MiB of weights need both devices.
"$CLRUN" run "$EXAMPLES/mlp.graph" --repeat 1 --devices 0,1 --device-limit 2M >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 0 "pipeline over 2 devices" "$tmp/out" "--devices 0,1"
grep -q "^output      y checksum $want\$" "$tmp/out" || fail "the pipeline's checksum is not the one-device one: $(cat "$tmp/out")"
grep -q "device 0 (.*): nodes \[0, 1), weights 1.53 MiB, peak .* of 2.00 MiB, moved in 0 B, out 128.00 KiB" "$tmp/out" ||
    fail "device 0's line: $(cat "$tmp/out")"
grep -q "device 1 (.*): nodes \[1, 6), weights 1.02 MiB, peak .* of 2.00 MiB, moved in 128.00 KiB, out 0 B" "$tmp/out" ||
    fail "device 1's line: $(cat "$tmp/out")"

"$CLRUN" run "$EXAMPLES/mlp.graph" --devices 0,1 --device-limit 1M >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 1 "no cut of the 6 steps into 2 consecutive stages fits the budgets (1.00 MiB, 1.00 MiB)" "$tmp/err" "limits no cut meets"
"$CLRUN" run "$EXAMPLES/mlp.graph" --devices 0,7 >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 1 "device 7 (of stage 1) does not exist: there are 2" "$tmp/err" "unknown device"
"$CLRUN" run "$EXAMPLES/mlp.graph" --devices 0,,1 >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 2 "--devices takes device indices separated by commas" "$tmp/err" "malformed --devices"
"$CLRUN" run "$EXAMPLES/mlp.graph" --devices 0,1 --trace "$tmp/t.json" >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 2 "--devices does not take --trace" "$tmp/err" "--devices --trace"

# --output-dir: the same .npy file as one device's
"$CLRUN" run "$EXAMPLES/mlp.graph" --repeat 1 --output-dir "$tmp/one-dir" >/dev/null 2>"$tmp/err" || fail "one device --output-dir: $(cat "$tmp/err")"
"$CLRUN" run "$EXAMPLES/mlp.graph" --repeat 1 --devices 0,1 --device-limit 2M --output-dir "$tmp/two-dir" >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 0 "pipeline over 2 devices" "$tmp/out" "--devices --output-dir"
cmp -s "$tmp/one-dir/y.npy" "$tmp/two-dir/y.npy" || fail "the pipeline's y.npy differs from one device's"

# --json: one object with the one-device checksum, both stages and the bytes moved
"$CLRUN" run "$EXAMPLES/mlp.graph" --repeat 3 --devices 0,1 --device-limit 2M --json >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 0 '"checksum":"'"$want"'"' "$tmp/out" "--devices --json"
/usr/bin/python3 - "$tmp/out" <<'PY' || fail "--devices --json: $(cat "$tmp/out")"
import json, sys
o = json.load(open(sys.argv[1]))
stages = o["stages"]
assert o["devices"] == 2 and o["repeat"] == 3 and len(stages) == 2, o
assert [(s["first_node"], s["end_node"]) for s in stages] == [(0, 1), (1, 6)], stages
assert o["bytes_moved"] == 131072 == stages[0]["bytes_out"] == stages[1]["bytes_in"], o
assert o["stage_peak_bytes"] == max(s["peak_bytes"] for s in stages) and all(s["peak_bytes"] <= s["limit_bytes"] == 2 << 20 for s in stages)
assert o["wall_ms_min"] <= o["wall_ms"] <= o["wall_ms_max"]
PY
# --micro-batches: 3 streamed through the stages; micro-batch 0 (seed 1) has the one-device
# checksum and output file, the report its time per micro-batch, busy times and bubble
"$CLRUN" run "$EXAMPLES/mlp.graph" --repeat 2 --devices 0,1 --device-limit 2M --micro-batches 3 --output-dir "$tmp/mb-dir" >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 0 "3 micro-batches per run on 2 threads: .* ms per micro-batch .* bubble .*%, moved 128.00 KiB per micro-batch, hand-off slots hold 256.00 KiB" "$tmp/out" "--micro-batches 3"
grep -q "^output      y checksum $want (micro-batch 0)\$" "$tmp/out" || fail "micro-batch 0's checksum is not the one-device one: $(cat "$tmp/out")"
grep -q "device 1 (.*): nodes \[1, 6), .* busy [0-9.]* ms" "$tmp/out" || fail "device 1's busy time: $(cat "$tmp/out")"
cmp -s "$tmp/one-dir/y.npy" "$tmp/mb-dir/y.npy" || fail "micro-batch 0's y.npy differs from one device's"
"$CLRUN" run "$EXAMPLES/mlp.graph" --repeat 1 --devices 0,1 --device-limit 2M --micro-batches 4 --json >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 0 '"checksum":"'"$want"'"' "$tmp/out" "--micro-batches --json"
/usr/bin/python3 - "$tmp/out" <<'PY' || fail "--micro-batches --json: $(cat "$tmp/out")"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["micro_batches"] == 4 and o["threads"] == 2 and o["bytes_moved"] == 131072, o
assert o["handoff_bytes"] == 2 * 131072 and 0 <= o["bubble_fraction"] < 1, o
assert abs(o["wall_ms_per_micro_batch"] * 4 - o["wall_ms"]) < 1e-6 * o["wall_ms"], o
assert abs(o["busy_ms"] - sum(s["busy_ms"] for s in o["stages"])) < 1e-9 * o["busy_ms"] + 1e-9, o
PY
"$CLRUN" run "$EXAMPLES/mlp.graph" --devices 0,1 --micro-batches 0 >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 2 "--micro-batches takes a count from 1 to 4096, not '0'" "$tmp/err" "--micro-batches 0"
"$CLRUN" run "$EXAMPLES/mlp.graph" --micro-batches 2 >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 2 "--micro-batches goes with --devices" "$tmp/err" "--micro-batches alone"
"$CLRUN" run "$EXAMPLES/mlp.graph" --device-limit 1M >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 2 "--device-limit goes with --devices" "$tmp/err" "--device-limit alone"

# one stage runs on the calling thread, and the report says so rather than "0 threads"
"$CLRUN" run "$EXAMPLES/mlp.graph" --repeat 1 --devices 0 --micro-batches 3 >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 0 "3 micro-batches per run on the calling thread: " "$tmp/out" "one device, --micro-batches 3"

[ $failures = 0 ] || exit 1
echo "cli_pipeline: all passed"
