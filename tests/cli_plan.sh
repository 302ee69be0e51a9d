#!/bin/sh
# clrun plan --capacity from the command line: a plan that fits (exit 0, --out written, every
# buffer under the capacity), "infeasible: proven" below the lower bound (exit 1, nothing
# written), "unknown" when the steps run out first (exit 1), the same verdicts in --json, and a
# malformed capacity as a usage error (exit 2). Step limits make every answer the same on any
# machine. Run by `make check` from the build directory; CLRUN_BIN overrides the tool.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
make_tmp plan-test

# perfect:150:2 packs exactly into 4 * 150 granules of 256 B: its optimum is 153600 bytes.
steps="--step-limit 200000 --time-limit 3600"
"$CLRUN" plan --gen perfect:150:2 $steps --capacity 153600 --out "$tmp/fits.csv" >"$tmp/out" 2>&1
rc=$?
expect 0 "the plan fits" "$tmp/out" "capacity at the optimum"
[ -s "$tmp/fits.csv" ] || fail "capacity at the optimum: --out not written"
# id,lower,upper,size,offset: every offset + size within the capacity
awk -F, 'NR > 1 && $5 + $4 > 153600 { bad = 1 } END { exit bad }' "$tmp/fits.csv" ||
    fail "capacity at the optimum: a buffer of --out ends above 153600"

"$CLRUN" plan --gen perfect:150:2 $steps --capacity 150K --json >"$tmp/fits.json" 2>&1
rc=$?
expect 0 '"verdict":"fits"' "$tmp/fits.json" "json, capacity 150K"
expect 0 '"capacity_bytes":153600' "$tmp/fits.json" "json, capacity 150K"

# Below the lower bound: infeasible at once, proven; --out is not written.
"$CLRUN" plan --gen perfect:150:2 $steps --capacity 153599 --out "$tmp/no.csv" >"$tmp/out" 2>"$tmp/err"
rc=$?
expect 1 "infeasible: proven" "$tmp/out" "capacity below the bound"
expect 1 "not written" "$tmp/err" "capacity below the bound"
[ ! -e "$tmp/no.csv" ] || fail "capacity below the bound: --out written anyway"
"$CLRUN" plan --gen perfect:150:2 $steps --capacity 153599 --json >"$tmp/no.json" 2>&1
rc=$?
expect 1 '"verdict":"infeasible"' "$tmp/no.json" "json, capacity below the bound"

# balanced:300:3 also packs into its bound (307200 B), but 50 steps are far too few to find it.
"$CLRUN" plan --gen balanced:300:3 --step-limit 50 --time-limit 3600 --capacity 307200 >"$tmp/out" 2>&1
rc=$?
expect 1 "unknown" "$tmp/out" "capacity out of reach of 50 steps"
"$CLRUN" plan --gen balanced:300:3 --step-limit 50 --time-limit 3600 --capacity 307200 --json >"$tmp/unknown.json" 2>&1
rc=$?
expect 1 '"verdict":"unknown"' "$tmp/unknown.json" "json, capacity out of reach"

# Malformed capacities are usage errors.
for bad in 0 abc -5 12Q; do
    "$CLRUN" plan --gen perfect:150:2 --capacity "$bad" >"$tmp/out" 2>&1
    rc=$?
    expect 2 "capacity" "$tmp/out" "--capacity $bad"
done

# A model's plan is the graph that runs (it planned the unfused graph without the convolution's
# scratch at alignment 1, and reported less than the run held): its peak is at least what
# `clrun run --allocator planned` holds, and a capacity below that is never "fits".
cat >"$tmp/scratch.graph" <<'GRAPH'
graph scratchy
input x: f32[1, 3, 9, 9]
const w: f32[5, 3, 3, 3] normal(0, 0.1) seed=1
node y: f32[1, 5, 9, 9] = conv2d(x, w) pad=[1, 1]
node a: f32[1, 5, 9, 9] = relu(y)
node z: f32[1, 5, 9, 9] = neg(a)
node s: f32[1, 5] = reduce_sum(z) axes=[2, 3]
output s
GRAPH
"$CLRUN" plan "$tmp/scratch.graph" --json >"$tmp/model-plan.json" 2>&1
rc=$?
expect 0 '"device_alignment":true' "$tmp/model-plan.json" "plan of a model"
"$CLRUN" run "$tmp/scratch.graph" --allocator planned --json >"$tmp/model-run.json" 2>"$tmp/err"
rc=$?
expect 0 '"peak_bytes"' "$tmp/model-run.json" "planned run of a model"
planned=$(sed -n 's/.*"peak_bytes": *\([0-9]*\).*/\1/p' "$tmp/model-plan.json" | head -n 1)
held=$(sed -n 's/.*"peak_bytes": *\([0-9]*\).*/\1/p' "$tmp/model-run.json" | head -n 1)
if [ -z "$planned" ] || [ -z "$held" ] || [ "$planned" -lt "$held" ]; then
    fail "plan of a model: peak ${planned:-?} below the planned run's ${held:-?}"
fi
if [ -n "$held" ]; then
    "$CLRUN" plan "$tmp/scratch.graph" --capacity $((held - 1)) >"$tmp/out" 2>&1
    grep -q "the plan fits" "$tmp/out" && fail "plan of a model: fits in $((held - 1)) B, under what the run holds"
fi

# An inference budget (clrun plan MODEL --budget SIZE, no --loss): a skip alive across the peak
# recomputed after it, named; a budget nothing meets refused with the least; nothing runs.
skip="${srcdir:-.}/tests/data/graphs/skip.graph"
"$CLRUN" plan "$skip" --budget 1G >"$tmp/out" 2>&1
rc=$?
expect 0 "nothing recomputed" "$tmp/out" "a budget above what the graph holds"
given=$("$CLRUN" run "$skip" --memory-budget 1G --repeat 1 --json 2>/dev/null |
        sed -n 's/.*"held_bytes": *\([0-9]*\).*/\1/p' | head -n 1)
if [ -z "$given" ]; then
    fail "inference budget: clrun run --json gave no held_bytes"
else
    CLRUN_OFFLOAD_RATE=1e30 "$CLRUN" plan "$skip" --budget $((given - 1)) >"$tmp/out" 2>&1
    rc=$?
    expect 0 "recomputed  m0, s" "$tmp/out" "a budget one byte under what the graph holds"
    # at a rate of 10 s costs more to recompute (its matmul too) than to move: offloaded
    CLRUN_OFFLOAD_RATE=10 "$CLRUN" plan "$skip" --budget $((given - 1)) >"$tmp/out" 2>&1
    rc=$?
    expect 0 "offloaded   1 tensor to host memory .*: s$" "$tmp/out" "a budget one byte under, met by offload"
    # the run's trace: the copies are transfer spans on a track of their own (tid 3), named
    CLRUN_OFFLOAD_RATE=10 "$CLRUN" run "$skip" --memory-budget $((given - 1)) --repeat 1 \
        --trace "$tmp/trace.json" >"$tmp/out" 2>&1
    rc=$?
    expect 0 "offloaded" "$tmp/out" "a run whose copies are traced"
    tr -d ' \n' <"$tmp/trace.json" >"$tmp/trace.min"
    grep -q '"cat":"transfer","ph":"X","ts":[0-9.e+-]*,"dur":[0-9.e+-]*,"pid":1,"tid":3' "$tmp/trace.min" ||
        fail "trace: no transfer span on track 3"
    grep -q '"tid":3,"args":{"name":"hostcopies' "$tmp/trace.min" ||
        fail "trace: the copies' track is not named"
    # --allocator names the mode a budget runs in (planned only by default), the same bits
    "$CLRUN" run "$skip" --repeat 1 >"$tmp/plain" 2>&1
    for allocator in bump naive; do
        CLRUN_OFFLOAD_RATE=10 "$CLRUN" run "$skip" --memory-budget $((given - 1)) --repeat 1 \
            --allocator $allocator >"$tmp/out" 2>&1
        rc=$?
        expect 0 "^allocator   $allocator$" "$tmp/out" "a budget under --allocator $allocator"
        [ "$(grep '^output' "$tmp/out")" = "$(grep '^output' "$tmp/plain")" ] ||
            fail "a budget under --allocator $allocator changed the outputs"
    done
fi
"$CLRUN" plan "$skip" --budget 64K >"$tmp/out" 2>&1
rc=$?
expect 1 "at best" "$tmp/out" "a budget nothing meets"

[ "$failures" = 0 ] || exit 1
echo "cli_plan: all checks passed"
